"""Intent recognition on text: hassil over the home grammar, targets resolved to entity ids."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Final

import hassil

from .catalog import Catalog, Entity
from .grammar import HomeGrammar
from .grammar.automaton import _ONES, _TENS
from .protocol import IntentData

_LOGGER = logging.getLogger(__name__)

_UNITS: Final = {w: i for i, w in enumerate(_ONES)}
_TENS_MAP: Final = {w: i * 10 for i, w in enumerate(_TENS) if w != "_"}
_NUMBER_WORDS: Final = {*_UNITS, *_TENS_MAP, "hundred", "thousand"}
_SPACE_RE: Final = re.compile(r"\s+")
# Domains an intent can act on when its template names none.
INTENT_DOMAINS: Final = {
    "HassClimateSetTemperature": ["climate"],
    "HassLightSet": ["light"],
    "HassSetPosition": ["cover", "valve"],
}


def words_to_digits(text: str) -> str:
    """Turn spelled numbers into digits: "set it to fifty five percent" -> "... 55 percent"."""
    out: list[str] = []
    total: int | None = None
    current = 0
    last_kind = ""

    def flush() -> None:
        nonlocal total, current, last_kind
        if total is not None:
            out.append(str(total + current))
        total, current, last_kind = None, 0, ""

    for token in text.split():
        word = token.lower()
        if word in _NUMBER_WORDS:
            if total is None:
                total = 0
            if word in _UNITS:
                if last_kind in ("unit", "teen") or (last_kind == "ten" and _UNITS[word] >= 10):
                    flush()
                    total = 0
                current += _UNITS[word]
                last_kind = "teen" if _UNITS[word] >= 10 else "unit"
            elif word in _TENS_MAP:
                if last_kind in ("unit", "teen", "ten"):
                    flush()
                    total = 0
                current += _TENS_MAP[word]
                last_kind = "ten"
            elif word == "hundred":
                current = max(current, 1) * 100
                last_kind = "hundred"
            else:
                total += max(current, 1) * 1000
                current = 0
                last_kind = "thousand"
            continue
        flush()
        out.append(token)
    flush()
    return " ".join(out)


@dataclass(frozen=True)
class Intent:
    """A recognised home intent with its targets resolved."""

    name: str
    slots: dict[str, Any]
    targets: list[str]
    text: str
    response_key: str = "default"
    confidence: float = 1.0
    hassil_name: str = ""  # the upstream intent name (HassTurnOn for an opened cover)
    error: str | None = None  # why the targets could not be resolved
    error_args: dict[str, Any] = field(default_factory=dict)

    def to_data(self) -> IntentData:
        """The intent as it goes over MQTT."""
        return IntentData(name=self.name, slots=dict(self.slots), targets=tuple(self.targets))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by ``ask`` and the events."""
        return self.to_data().to_dict()


class Nlu:
    """Recognises intents in text for one home."""

    def __init__(self, grammar: HomeGrammar, catalog: Catalog) -> None:
        """Match against this grammar; resolve targets in this catalog."""
        self.grammar = grammar
        self.catalog = catalog
        self._skip_words = list(grammar.document.get("skip_words", []))

    def recognize(self, text: str) -> Intent | None:
        """The best intent for the text, or None when it is not a home command."""
        clean = _SPACE_RE.sub(" ", words_to_digits(text.strip().rstrip(".!?"))).strip()
        if not clean:
            return None
        context: dict[str, Any] = {}
        if self.grammar.site_area:
            context["area"] = self.grammar.site_area
        try:
            result = hassil.recognize_best(
                clean, self.grammar.intents, slot_lists=self.grammar.slot_lists,
                skip_words=self._skip_words, intent_context=context or None,
                language=self.grammar.language, best_slot_name="name",
            )
        except Exception:  # hassil raises on odd input; a miss, not a crash
            _LOGGER.exception("hassil failed on %r", clean)
            return None
        if result is None:
            return None
        return self._resolve(result, text)

    def _resolve(self, result: Any, text: str) -> Intent:
        slots: dict[str, Any] = {}
        for key, entity in result.entities.items():
            value = entity.value
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            slots[key] = value
        requires = dict(result.intent_data.requires_context or {})
        return self.resolve(result.intent.name, slots, text, requires=requires,
                            response_key=result.response or "default")

    def resolve(self, hassil_name: str, slots: dict[str, Any], text: str, *,
                requires: dict[str, Any] | None = None, response_key: str = "default") -> Intent:
        """Resolve an intent's slots (name, area, domain, ...) to the catalog's entities."""
        requires = requires or {}
        domains = (_as_list(slots.get("domain")) or _as_list(requires.get("domain"))
                   or INTENT_DOMAINS.get(hassil_name, []))
        name = slots.get("name")
        area = slots.get("area") or (self.grammar.site_area if "area" in requires else None)
        device_class = slots.get("device_class")
        targets: list[Entity] = []
        error, error_args = None, {}
        if name is not None:
            wanted = str(name).casefold()
            targets = [e for e in self.catalog
                       if wanted in (n.casefold() for n in e.names)
                       and (not domains or e.domain in domains)
                       and (area is None or e.area == area)]
            if not targets:
                error, error_args = ("no_entity_in_area" if area else "no_entity"), {
                    "entity": name, "area": area}
        elif area is not None or domains or device_class:
            targets = [e for e in self.catalog
                       if (area is None or e.area == area)
                       and (not domains or e.domain in domains)
                       and (device_class is None
                            or e.attributes.get("device_class") == device_class)]
            if not targets:
                what = device_class or (domains[0] if domains else "device")
                key = "no_device_class" if device_class else "no_domain"
                error = key + ("_in_area" if area else "")
                error_args = {"device_class": what, "domain": what, "area": area}
        if hassil_name == "HassClimateSetTemperature" and not targets:
            targets = [e for e in self.catalog if e.domain == "climate"]
            error = None if targets else "no_domain"
            error_args = {"domain": "climate"}
        intent_name = hassil_name
        if targets and all(t.domain == "cover" for t in targets):
            intent_name = {"HassTurnOn": "HassOpenCover",
                           "HassTurnOff": "HassCloseCover"}.get(intent_name, intent_name)
        return Intent(
            name=intent_name,
            slots=slots,
            targets=[t.entity_id for t in targets],
            text=text,
            response_key=response_key,
            hassil_name=hassil_name,
            error=error,
            error_args=error_args,
        )


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]
