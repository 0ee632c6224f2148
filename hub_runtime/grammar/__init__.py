"""The home grammar: Home Assistant intent templates specialised to one catalog.

One :class:`HomeGrammar` holds both views of the same language:

* the hassil ``Intents`` and slot lists that the NLU matches text against;
* the minimal word DFA that the grammar tier of the recogniser decodes with,
  that end-of-turn asks about completeness, and that Whisper output snaps to.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

import hassil
from hassil.intents import RangeSlotList, TextSlotList, TextSlotValue

from ..catalog import Catalog
from .automaton import (
    Dfa,
    Nfa,
    TemplateCompiler,
    minimize,
    number_words,
    sentence_expression,
    tokenize,
)

_LOGGER = logging.getLogger(__name__)

SUPPORTED_INTENTS: Final = (
    "HassTurnOn",
    "HassTurnOff",
    "HassToggle",
    "HassLightSet",
    "HassClimateSetTemperature",
    "HassGetState",
    "HassSetPosition",
    "HassGetCurrentTime",
    "HassNevermind",
    "DuplexHubHelp",
)
# Numbers the grammar tier spells out for range lists (fractions are left to the NLU).
MAX_SPOKEN_RANGE: Final = 100
SKIP_PREFIXES: Final = ("please", "can you", "could you", "would you", "hey")
SKIP_SUFFIXES: Final = ("please", "for me")

# Blocks added to the upstream templates, in their style: HassToggle has no English
# templates, and a home with one thermostat needs no room to set the temperature.
_EXTRA_INTENTS: Final[dict[str, Any]] = {
    "HassClimateSetTemperature": {
        "data": [
            {
                "sentences": [
                    "(<numeric_value_set>|adjust) [the] (<temp>|thermostat|heating) to "
                    "{temperature}[([ ]°)|( degree[s])]",
                ],
            }
        ]
    },
    "DuplexHubHelp": {
        "data": [{"sentences": ["what can you do", "what can I say", "help [me]",
                                "how (do|does) this work"]}]
    },
    "HassToggle": {
        "data": [
            {
                "sentences": [
                    "toggle [<the>] {name}",
                    "toggle [<the>] {area} {name}",
                    "toggle [<the>] {name} <in> [<the>] {area}",
                ],
                "requires_context": {"domain": ["light", "switch", "fan", "input_boolean"]},
            },
            {
                "sentences": ["toggle [<all>] [<the>] {area} <light>",
                              "toggle [(<all>|<the>)] <light> <in> [<the>] {area}"],
                "slots": {"domain": "light"},
                "response": "lights_area",
            },
        ]
    }
}
_EXTRA_RESPONSES: Final = {
    "HassToggle": {"default": "Toggled", "lights_area": "Toggled the lights"},
    "DuplexHubHelp": {"default": (
        "I can switch your lights, switches and fans on and off, or toggle them. "
        "I can set a light's brightness and colour, and the temperature of the thermostat. "
        "I can open and close covers such as doors and blinds, or set their position. "
        "You can ask me whether something is on, what a sensor says, or what time it is. "
        "And you can talk over me at any time: I will stop and listen."
    )},
}


@cache
def _intents_document(language: str) -> dict[str, Any]:
    path = resources.files("home_assistant_intents").joinpath("data", f"{language}.json")
    with path.open("r", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def intents_document(language: str) -> dict[str, Any]:
    """The upstream intents for a language, limited to the supported intents."""
    doc = copy.deepcopy(_intents_document(language))
    doc["intents"] = {k: v for k, v in doc["intents"].items() if k in SUPPORTED_INTENTS}
    for name, body in _EXTRA_INTENTS.items():
        doc["intents"].setdefault(name, {"data": []})["data"].extend(copy.deepcopy(body["data"]))
    responses = doc.setdefault("responses", {}).setdefault("intents", {})
    for name, body in _EXTRA_RESPONSES.items():
        responses.setdefault(name, dict(body))
    return doc


@dataclass(frozen=True)
class NameValue:
    """One spoken name of an entity."""

    text: str
    entity_id: str
    domain: str
    canonical: str  # the entity's name (the slot value for an alias too)


def _domain_ok(domain: str, requires: dict[str, Any], excludes: dict[str, Any]) -> bool:
    want = requires.get("domain")
    if want is not None:
        allowed = [want] if isinstance(want, str) else list(want)
        if domain not in allowed:
            return False
    not_want = excludes.get("domain")
    if not_want is not None:
        banned = [not_want] if isinstance(not_want, str) else list(not_want)
        if domain in banned:
            return False
    return True


class HomeGrammar:
    """The language of commands for one home."""

    def __init__(self, catalog: Catalog, *, language: str = "en", site_area: str | None = None):
        """Specialise the templates to this catalog (0.3-1 s for a typical home)."""
        started = time.perf_counter()
        self.language = language
        self.site_area = site_area
        self.document = intents_document(language)
        self.intents = hassil.Intents.from_dict(self.document)
        self.names: list[NameValue] = [
            NameValue(text=name, entity_id=e.entity_id, domain=e.domain, canonical=e.name)
            for e in catalog
            for name in e.names
        ]
        self.areas: list[str] = catalog.areas
        self.slot_lists: dict[str, Any] = {
            "name": TextSlotList(
                name="name",
                values=[
                    TextSlotValue(
                        text_in=hassil.TextChunk(n.text), value_out=n.canonical,
                        context={"domain": n.domain},
                    )
                    for n in self.names
                ],
            ),
            "area": TextSlotList(
                name="area",
                values=[
                    TextSlotValue(text_in=hassil.TextChunk(a), value_out=a)
                    for a in self.areas
                ],
            ),
            "floor": TextSlotList(name="floor", values=[]),
        }
        self.dfa = self._compile()
        self.build_s = time.perf_counter() - started
        _LOGGER.info(
            "grammar: %d names, %d areas -> %d states, %d words in %.2f s",
            len(self.names), len(self.areas), self.dfa.num_states, len(self.dfa.words),
            self.build_s,
        )

    # -- automaton ------------------------------------------------------------------
    def _compile(self) -> Dfa:
        nfa = Nfa.empty()
        body_start, body_end = nfa.new_state(), nfa.new_state()
        nfa.add(0, "", body_start)
        for prefix in SKIP_PREFIXES:
            nfa.add_words(0, tokenize(prefix), body_start)
        nfa.add(body_end, "", nfa.final)
        for suffix in SKIP_SUFFIXES:
            nfa.add_words(body_end, tokenize(suffix), nfa.final)
        rules = dict(self.intents.expansion_rules)
        for intent in self.intents.intents.values():
            for data in intent.data:
                requires = dict(data.requires_context or {})
                excludes = dict(data.excludes_context or {})
                area_req = requires.get("area")
                if isinstance(area_req, dict) and area_req.get("slot") and not self.site_area:
                    continue  # "turn on the lights here" needs to know the hub's room
                local_rules = {**rules, **(getattr(data, "expansion_rules", None) or {})}
                compiler = TemplateCompiler(nfa, local_rules, functools.partial(
                    self._list_values, requires=requires, excludes=excludes, data=data))
                for sentence in data.sentences:
                    compiler.add_sentence(sentence_expression(sentence), body_start, body_end)
        return minimize(nfa)

    def _list_values(
        self, ref: Any, requires: dict[str, Any], excludes: dict[str, Any], data: Any,
    ) -> list[list[str]] | list[Any] | None:
        name = ref.list_name
        if name == "name":
            return [tokenize(n.text) for n in self.names
                    if _domain_ok(n.domain, requires, excludes)]
        if name == "area":
            return [tokenize(a) for a in self.areas]
        if name == "floor":
            return None
        inline = ref.get_inline_range() if hasattr(ref, "get_inline_range") else None
        if inline is not None:
            lo, hi, step = inline
            return [number_words(n).split() for n in range(lo, min(hi, MAX_SPOKEN_RANGE) + 1, step)]
        slot_list = (getattr(data, "slot_lists", None) or {}).get(name) or \
            self.intents.slot_lists.get(name)
        if isinstance(slot_list, RangeSlotList):
            stop = min(slot_list.stop, max(slot_list.start, MAX_SPOKEN_RANGE))
            return [number_words(n).split()
                    for n in range(slot_list.start, stop + 1, slot_list.step)]
        if isinstance(slot_list, TextSlotList):
            return [v.text_in for v in slot_list.values]
        return None

    # -- queries ------------------------------------------------------------------------
    def is_complete(self, words: list[str]) -> bool:
        """Whether the words already form a full command."""
        return bool(words) and self.dfa.accepts(words)

    @property
    def vocabulary(self) -> set[str]:
        """Every word of the language."""
        return self.dfa.words
