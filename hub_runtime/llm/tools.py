"""Tool calls the LLM can make, constrained to the home by construction.

The model never picks from open text: a GBNF grammar generated from the current catalog
allows only the supported intents, only existing entity names and areas (per intent, only
the domains it can act on) and values in range. Which grammar a turn gets is decided
before the model runs, from the words of the turn (:func:`classify`):

- ``act``: the turn names something in the home (an entity, an area, a kind of device, or
  how the room feels: dark, cold, ...) and is not a question → the model must answer with
  a call;
- ``ask``: such a turn that is a question → only read-only calls (state, time): a question
  about state can never change state;
- ``chat``: anything else → spoken text only (no markup).

A call is parsed and validated again (:func:`parse_call`), so an engine that ignores the
grammar (a remote server) still cannot act on anything outside the home.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from ..catalog import Catalog, Entity
from ..nlu import Intent, Nlu

READ_ONLY: Final = ("HassGetState", "HassGetCurrentTime")
# intent -> domains whose entities it may name (None: no target)
TARGET_DOMAINS: Final[dict[str, tuple[str, ...] | None]] = {
    "HassTurnOn": ("light", "switch", "fan", "climate", "media_player", "input_boolean", "humidifier"),
    "HassTurnOff": ("light", "switch", "fan", "climate", "media_player", "input_boolean", "humidifier"),
    "HassToggle": ("light", "switch", "fan", "input_boolean"),
    "HassOpenCover": ("cover",),
    "HassCloseCover": ("cover",),
    "HassSetPosition": ("cover",),
    "HassLightSet": ("light",),
    "HassClimateSetTemperature": ("climate",),
    "HassGetState": ("*",),
    "HassGetCurrentTime": None,
    "HassNevermind": None,
}
COLORS: Final = ("white", "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown")
TEMPERATURE_RANGE: Final = (5, 35)  # degrees (Celsius homes); a value outside is not in the grammar

_DOMAIN_WORDS: Final = {
    "light": "light lights lamp lamps bulb bulbs dark darker bright brighter dim dimmer",
    "switch": "switch switches plug plugs socket outlet",
    "fan": "fan fans stuffy breeze air",
    "climate": "thermostat heating heater heat cold colder warm warmer hot hotter chilly freezing temperature",
    "cover": "blind blinds curtain curtains shade shades shutter shutters door garage cover window",
    "media_player": "music tv television speaker volume",
    "sensor": "temperature humidity sensor outside",
}
_QUESTION_START: Final = frozenset(
    "is are was were what what's whats which who when where why how do does did has have".split())
_REQUEST_START: Final = re.compile(r"^(can|could|would|will|please)\b( you)?\b")
_STOP_WORDS: Final = frozenset("the a an in on of to my is it and or at".split())
_WORD_RE: Final = re.compile(r"[a-z0-9']+")
# words of names that say what kind of thing it is, not which one
_GENERIC: Final = frozenset(" ".join(_DOMAIN_WORDS.values()).split()) | _STOP_WORDS


class Mode(enum.Enum):
    """What a turn may produce."""

    ACT = "act"
    ASK = "ask"
    CHAT = "chat"


@dataclass(frozen=True)
class Call:
    """A validated tool call: an intent and its slots, with names from the catalog."""

    intent: str
    slots: dict[str, Any]

    def to_json(self) -> str:
        """The call as the model writes it."""
        return json.dumps({"intent": self.intent, **self.slots})


class CallError(ValueError):
    """A call that is not allowed for this home; str() says why."""


def _quote(text: str) -> str:
    """A GBNF string literal for a JSON string value."""
    body = json.dumps(text)  # "..." with JSON escapes
    return '"' + body.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _alt(items: list[str]) -> str:
    return " | ".join(items) if items else '"\\"\\""'


def _number_rule(lo: int, hi: int) -> str:
    """GBNF alternatives for the whole numbers lo..hi."""
    return " | ".join(f'"{n}"' for n in range(hi, lo - 1, -1))  # longest first


class HomeTools:
    """The calls one catalog allows: grammar, vocabulary, validation."""

    def __init__(self, catalog: Catalog) -> None:
        """Build for this catalog."""
        self.catalog = catalog
        self.areas = catalog.areas
        self.names: dict[str, Entity] = {}
        for e in catalog:
            for n in e.names:
                self.names.setdefault(n.casefold(), e)
        words: set[str] = set()
        for e in catalog:
            for n in (*e.names, e.area or ""):
                words.update(w for w in _WORD_RE.findall(n.lower()) if w not in _STOP_WORDS)
        for domain in catalog.domains:
            words.update(_DOMAIN_WORDS.get(domain, "").split())
        self.vocabulary = frozenset(words)

    # -- which grammar --------------------------------------------------------------------
    def classify(self, text: str) -> Mode:
        """ACT, ASK or CHAT for a turn's words (see the module docstring)."""
        low = text.lower().strip()
        words = _WORD_RE.findall(low)
        if not words or not any(w in self.vocabulary for w in words):
            return Mode.CHAT
        question = (words[0] in _QUESTION_START or low.endswith("?")) and not _REQUEST_START.match(low)
        return Mode.ASK if question else Mode.ACT

    def focus(self, text: str) -> frozenset[str] | None:
        """The entities the words name (by name, alias or room), or None when they name none.

        A call may then only target these: the model cannot wander to another device.
        """
        words = set(_WORD_RE.findall(text.lower()))

        def named(name: str) -> bool:
            content = [w for w in _WORD_RE.findall(name.lower()) if w not in _STOP_WORDS]
            return bool(content) and all(w in words for w in content)

        areas = {a for a in self.areas if named(a)}
        ids = {e.entity_id for e in self.catalog if any(named(n) for n in e.names) or e.area in areas}
        if not ids:  # no whole name: a distinctive word of one ("outside" for Outside Temperature)
            ids = {e.entity_id for e in self.catalog
                   if any(w in words and w not in _GENERIC for n in e.names for w in _WORD_RE.findall(n.lower()))}
        return frozenset(ids) or None

    def entities_for(self, intent: str, focus: frozenset[str] | None = None) -> list[Entity]:
        """The entities an intent may name (within ``focus`` when given)."""
        domains = TARGET_DOMAINS[intent]
        if domains is None:
            return []
        ents = [e for e in self.catalog if focus is None or e.entity_id in focus]
        if domains == ("*",):
            return ents
        return [e for e in ents if e.domain in domains]

    def intents(self, mode: Mode, focus: frozenset[str] | None = None) -> list[str]:
        """The intents allowed in a mode that have something to act on (within ``focus``)."""
        names = READ_ONLY if mode is Mode.ASK else tuple(TARGET_DOMAINS)
        if focus is not None:  # something was named: no target-less intents
            return [n for n in names if TARGET_DOMAINS[n] is not None and self.entities_for(n, focus)]
        return [n for n in names if TARGET_DOMAINS[n] is None or self.entities_for(n)]

    # -- the grammar ------------------------------------------------------------------------
    def grammar(self, mode: Mode, focus: frozenset[str] | None = None) -> str:
        """GBNF for this mode: a call (ACT, ASK) or voice-friendly speech (CHAT)."""
        if mode is Mode.CHAT:
            return SPEECH_GRAMMAR
        rules: dict[str, str] = {}
        calls = []
        for intent in self.intents(mode, focus):
            rule = "call-" + intent.lower()
            head = f'"{{\\"intent\\": \\"{intent}\\""'
            ents = self.entities_for(intent, focus)
            names = _alt([_quote(n) for e in ents for n in e.names])
            areas = sorted({e.area for e in ents if e.area})
            domains = sorted({e.domain for e in ents})
            by_name = f'", \\"name\\": " ({names})'
            by_area = (f'", \\"area\\": " ({_alt([_quote(a) for a in areas])}) '
                       f'(", \\"domain\\": " ({_alt([_quote(d) for d in domains])}))?') if areas else None
            target = f"({by_name} | {by_area})" if by_area and intent != "HassGetState" else by_name
            if intent in ("HassGetCurrentTime", "HassNevermind"):
                body = f'{head} "}}"'
            elif intent == "HassLightSet":
                rules["pct"] = _number_rule(0, 100)
                rules["color"] = _alt([_quote(c) for c in COLORS])
                body = f'{head} {target} (", \\"brightness\\": " pct | ", \\"color\\": " color) "}}"'
            elif intent == "HassSetPosition":
                rules["pct"] = _number_rule(0, 100)
                body = f'{head} {target} ", \\"position\\": " pct "}}"'
            elif intent == "HassClimateSetTemperature":
                rules["temp"] = _number_rule(*TEMPERATURE_RANGE)
                body = f'{head} ({target})? ", \\"temperature\\": " temp "}}"'
            else:
                body = f'{head} {target} "}}"'
            rules[rule] = body
            calls.append(rule)
        lines = [f"root ::= {' | '.join(calls)}"]
        lines += [f"{k} ::= {v}" for k, v in rules.items()]
        return "\n".join(lines) + "\n"

    # -- validation -----------------------------------------------------------------------
    def parse_call(self, text: str, mode: Mode = Mode.ACT, focus: frozenset[str] | None = None) -> Call:
        """Validate model output as a call allowed in ``mode`` (and ``focus``); CallError otherwise."""
        try:
            data = json.loads(text.strip())
        except json.JSONDecodeError as err:
            raise CallError(f"not a JSON call ({err.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("intent"), str):
            raise CallError("no intent")
        intent = data.pop("intent")
        if intent not in self.intents(mode, focus):
            raise CallError(f"intent {intent!r} is not allowed here")
        slots: dict[str, Any] = {}
        ents = self.entities_for(intent, focus)
        if "name" in data:
            name = data.pop("name")
            match = [e for e in ents if isinstance(name, str) and name.casefold() in
                     (n.casefold() for n in e.names)]
            if not match:
                raise CallError(f"no entity named {name!r} for {intent}")
            slots["name"] = name
        if "area" in data:
            area = data.pop("area")
            if area not in {e.area for e in ents}:
                raise CallError(f"no area {area!r} for {intent}")
            slots["area"] = area
        if "domain" in data:
            domain = data.pop("domain")
            if domain not in {e.domain for e in ents}:
                raise CallError(f"no domain {domain!r} for {intent}")
            slots["domain"] = domain
        for key, lo, hi in (("brightness", 0, 100), ("position", 0, 100),
                            ("temperature", *TEMPERATURE_RANGE)):
            if key in data:
                value = data.pop(key)
                if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
                    raise CallError(f"{key} {value!r} is out of range ({lo} to {hi})")
                slots[key] = int(value) if float(value).is_integer() else value
        if "color" in data:
            color = data.pop("color")
            if color not in COLORS:
                raise CallError(f"colour {color!r} is not one of {', '.join(COLORS)}")
            slots["color"] = color
        if data:
            raise CallError(f"unknown fields {sorted(data)}")
        needs_target = TARGET_DOMAINS[intent] is not None and intent != "HassClimateSetTemperature"
        if needs_target and not ({"name", "area"} & set(slots)):
            raise CallError(f"{intent} needs a name or an area")
        if intent == "HassLightSet" and not ({"brightness", "color"} & set(slots)):
            raise CallError("HassLightSet needs a brightness or a colour")
        if intent in ("HassSetPosition", "HassClimateSetTemperature") and not (
                {"position", "temperature"} & set(slots)):
            raise CallError(f"{intent} needs a value")
        return Call(intent=intent, slots=slots)


    def to_intent(self, call: Call, nlu: Nlu, text: str) -> Intent:
        """The intent a call stands for, resolved by the NLU exactly as a spoken command is."""
        slots = dict(call.slots)
        hassil_name, key = call.intent, "default"
        if call.intent in ("HassOpenCover", "HassCloseCover"):
            hassil_name = "HassTurnOn" if call.intent == "HassOpenCover" else "HassTurnOff"
            slots.setdefault("domain", "cover")
            key = "cover"
        elif call.intent in ("HassTurnOn", "HassTurnOff") and "name" not in slots:
            key = {"light": "lights_area", "fan": "fans_area"}.get(str(slots.get("domain")), "default")
        elif call.intent == "HassGetState":
            key = "one"
        elif call.intent == "HassLightSet":
            key = "brightness" if "brightness" in slots else "color"
        return nlu.resolve(hassil_name, slots, text, response_key=key)


# Spoken text: starts with a letter or digit; no markup, lists, braces or new lines.
SPEECH_GRAMMAR: Final = 'root ::= [A-Za-z0-9"\'] [^\\n{}*#<>|`~_\\[\\]]*\n'
