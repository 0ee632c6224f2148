"""What the LLM is told besides the words.

The time, the home's states, what the cameras see, and what the user asked the hub to
remember. All of it goes after the stable prompt prefix.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..catalog import Catalog

_LOGGER = logging.getLogger(__name__)

SCENE_TTL_S: Final = 600.0  # an object no camera updated for this long is forgotten
PREFERENCE_KEYS: Final = ("name", "units", "style")


def time_context(now: dt.datetime | None = None) -> str:
    """The time as a sentence: ``It is Thursday, 3 December 2026, 7:05 in the morning.``."""
    now = now or dt.datetime.now()
    part = "morning" if now.hour < 12 else "afternoon" if now.hour < 18 else "evening"
    hour = now.hour % 12 or 12
    return f"It is {now:%A}, {now.day} {now:%B %Y}, {hour}:{now.minute:02d} in the {part}."


def states_context(catalog: Catalog) -> str:
    """One short clause per entity: ``Kitchen Light (Kitchen) is on``."""
    parts = []
    for e in catalog:
        where = f" ({e.area})" if e.area else ""
        parts.append(f"{e.name}{where} is {e.state_with_unit}")
    return "Now: " + "; ".join(parts) + "." if parts else ""


class Scene:
    """Objects that cameras see, from Frigate's ``frigate/events`` messages."""

    def __init__(self, ttl_s: float = SCENE_TTL_S) -> None:
        """Forget objects not updated for ``ttl_s``."""
        self.ttl_s = ttl_s
        self._objects: dict[str, tuple[str, str, float]] = {}  # id -> (camera, label, last seen)

    def update(self, payload: bytes) -> None:
        """Apply one Frigate event (``{"type": "new"|"update"|"end", "after": {...}}``).

        Raises ValueError for a payload that is not a Frigate event.
        """
        try:
            data = json.loads(payload)
            kind = data["type"]
            after = data["after"]
            oid, camera, label = str(after["id"]), str(after["camera"]), str(after["label"])
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"not a Frigate event ({err})") from None
        if kind == "end":
            self._objects.pop(oid, None)
        elif kind in ("new", "update"):
            self._objects[oid] = (camera.replace("_", " "), label.replace("_", " "), time.monotonic())
        else:
            raise ValueError(f"unknown Frigate event type {kind!r}")

    def describe(self) -> str:
        """``The driveway camera sees a person and a car.`` (empty when nothing is seen)."""
        now = time.monotonic()
        self._objects = {k: v for k, v in self._objects.items() if now - v[2] < self.ttl_s}
        by_camera: dict[str, dict[str, int]] = {}
        for camera, label, _ in self._objects.values():
            counts = by_camera.setdefault(camera, {})
            counts[label] = counts.get(label, 0) + 1
        sentences = []
        for camera, counts in sorted(by_camera.items()):
            things = [f"a {label}" if n == 1 else f"{_number_word(n)} {label}s" for label, n in counts.items()]
            listed = things[0] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]
            sentences.append(f"The {camera} camera sees {listed}.")
        return " ".join(sentences)


def _number_word(n: int) -> str:
    words = "zero one two three four five six seven eight nine ten".split()
    return words[n] if n < len(words) else str(n)


_NAME_RE: Final = re.compile(r"\b(?:my name is|call me)\s+([a-z][a-z' -]{0,30}?)(?:[.!,]|$| please)", re.I)
_UNITS_RE: Final = re.compile(r"\b(?:use|prefer|i like)\s+(celsius|fahrenheit|metric|imperial)\b", re.I)
_SHORT_RE: Final = re.compile(r"\b(?:keep (?:it|answers|your answers) (?:short|brief)|be brief|shorter answers)\b",
                              re.I)
_LONG_RE: Final = re.compile(r"\b(?:more detail|be more detailed|longer answers|explain more)\b", re.I)


class Preferences:
    """Remembered user preferences (name, units, answer style), persisted as JSON."""

    def __init__(self, path: str | Path | None) -> None:
        """Load from ``path`` (None: kept in memory only)."""
        self.path = Path(path) if path else None
        self.values: dict[str, str] = {}
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.values = {k: str(v) for k, v in data.items() if k in PREFERENCE_KEYS}
            except (OSError, ValueError, AttributeError) as err:
                _LOGGER.warning("preferences %s unreadable (%s); starting empty", self.path, err)

    def learn(self, text: str) -> str | None:
        """Remember a preference stated in ``text``; the confirmation to say, else None."""
        if m := _NAME_RE.search(text):
            name = m.group(1).strip().title()
            self._set("name", name)
            return f"Nice to meet you, {name}. I'll remember that."
        if m := _UNITS_RE.search(text):
            units = m.group(1).lower()
            self._set("units", units)
            return f"Okay, I'll use {units}."
        if _SHORT_RE.search(text):
            self._set("style", "short")
            return "Okay, I'll keep it short."
        if _LONG_RE.search(text):
            self._set("style", "detailed")
            return "Okay, I'll give you more detail."
        return None

    def _set(self, key: str, value: str) -> None:
        self.values[key] = value
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.values, indent=1), encoding="utf-8")
            os.replace(tmp, self.path)

    def describe(self) -> str:
        """The preferences as sentences: ``The user's name is Ada. Use celsius. Answer briefly.``."""
        v = self.values
        parts = []
        if "name" in v:
            parts.append(f"The user's name is {v['name']}.")
        if "units" in v:
            parts.append(f"Use {v['units']} units.")
        if v.get("style") == "short":
            parts.append("Answer in one short sentence.")
        elif v.get("style") == "detailed":
            parts.append("The user likes detailed answers.")
        return " ".join(parts)


@dataclass(frozen=True)
class Persona:
    """How the hub speaks."""

    name: str
    prompt: str


PERSONAS: Final = {
    "assistant": Persona("assistant", "You are a voice assistant in a home. Answer briefly, in at most two "
                                      "short spoken sentences."),
    "friend": Persona("friend", "You are a friendly voice in the home, casual and warm. Keep it short, "
                                "like talking to a friend."),
    "professor": Persona("professor", "You are a precise, thorough professor speaking aloud. Explain clearly "
                                      "and exactly, in a few spoken sentences."),
}
VOICE_RULES: Final = ("You are heard, not read: plain sentences, no lists, no markdown, no emojis; "
                      "say numbers as a person would.")


def persona(name: str, custom: str | None) -> Persona:
    """A built-in persona, or ``custom`` with its prompt."""
    if name == "custom":
        return Persona("custom", custom or PERSONAS["assistant"].prompt)
    return PERSONAS[name]


def describe_home(catalog: Catalog) -> str:
    """The stable part about the home: devices and rooms (names only, no states)."""
    lines = []
    for e in catalog:
        where = f" in the {e.area}" if e.area else ""
        aka = f" (also: {', '.join(e.aliases)})" if e.aliases else ""
        lines.append(f"{e.name}{aka}: a {e.domain.replace('_', ' ')}{where}")
    return "The home has: " + "; ".join(lines) + "."


def fields(data: dict[str, Any]) -> str:
    """Compact JSON for prompts."""
    return json.dumps(data, separators=(", ", ": "))
