"""The home grammar: Home Assistant intent templates specialised to one catalog.

One :class:`HomeGrammar` holds both views of the same language:

* the hassil ``Intents`` and slot lists that the NLU matches text against;
* the minimal word DFA that the grammar tier of the recogniser decodes with and
  that end-of-turn asks about completeness; and one with the wildcards kept
  (:meth:`HomeGrammar.spoken_dfa`), that Whisper decodes within.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import threading
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

import hassil
from hassil.intents import RangeSlotList, TextSlotList, TextSlotValue, WildcardSlotList

from ..catalog import Catalog, Entity
from ..protocol import SUPPORTED_INTENTS
from ..smalltalk import ANSWERS
from ..smalltalk import INTENTS as SMALL_TALK
from ..text import BACKCHANNELS, STOP_PHRASES
from .automaton import (
    WILDCARD,
    Dfa,
    Nfa,
    TemplateCompiler,
    minimize,
    number_words,
    sentence_expression,
    tokenize,
)

_LOGGER = logging.getLogger(__name__)

# Numbers the grammar tier spells out for range lists (fractions are left to the NLU).
MAX_SPOKEN_RANGE: Final = 100
# Home Assistant's skip words, and "hey"; not "i want to": Home Assistant does not take "i want
# to go back" for "go back" (the previous track), nor should the hub (people talking in the room)
SKIP_PREFIXES: Final = ("please", "can you", "could you", "would you", "hey", "i'd like to")
SKIP_SUFFIXES: Final = ("please", "for me")
EXPOSED_ATTRIBUTES: Final = ("device_class",)  # entity attributes templates may require (as Home Assistant)

# Home Assistant has no English templates for HassToggle; these follow the style of its own.
_EXTRA_INTENTS: Final[dict[str, Any]] = {
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
_EXTRA_RESPONSES: Final = {"HassToggle": {"default": "Toggled", "lights_area": "Toggled the lights"}}


@cache
def _intents_document(language: str) -> dict[str, Any]:
    path = resources.files("home_assistant_intents").joinpath("data", f"{language}.json")
    with path.open("r", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def intents_document(language: str) -> dict[str, Any]:
    """Home Assistant's intents for a language, limited to those a hub supports, plus HassToggle and small talk."""
    doc = copy.deepcopy(_intents_document(language))
    doc["intents"] = {k: v for k, v in doc["intents"].items() if k in SUPPORTED_INTENTS}
    for name, body in {**_EXTRA_INTENTS, **SMALL_TALK}.items():
        doc["intents"].setdefault(name, {"data": []})["data"].extend(copy.deepcopy(body["data"]))
    responses = doc.setdefault("responses", {}).setdefault("intents", {})
    for name, body in _EXTRA_RESPONSES.items():
        responses.setdefault(name, dict(body))
    return doc


@dataclass(frozen=True)
class NameValue:
    """One spoken name of an entity, with the context templates may require (domain, device class)."""

    text: str
    entity_id: str
    canonical: str  # the entity's name (the slot value for an alias too)
    context: dict[str, Any]


def name_context(entity: Entity) -> dict[str, Any]:
    """What a template's ``requires_context`` may check about an entity (as Home Assistant)."""
    context: dict[str, Any] = {"domain": entity.domain}
    for attr in EXPOSED_ATTRIBUTES:
        if attr in entity.attributes:
            context[attr] = entity.attributes[attr]
    return context


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) or not isinstance(value, list | tuple) else list(value)


def context_ok(context: dict[str, Any], requires: dict[str, Any], excludes: dict[str, Any]) -> bool:
    """Whether a name with this context may fill a template with these requirements."""
    for key, want in requires.items():
        if isinstance(want, dict):  # a slot from the intent context (the area), not a name's
            continue
        if key not in context or context[key] not in _as_list(want):
            return False
    for key, banned in excludes.items():
        if key in context and context[key] in _as_list(banned):
            return False
    return True


class HomeGrammar:
    """The language of commands for one home."""

    def __init__(self, catalog: Catalog, *, language: str = "en", site_area: str | None = None):
        """Specialise the templates to this catalog (the automaton waits until it is needed)."""
        self.language = language
        self.site_area = site_area
        self.document = intents_document(language)
        self.intents = hassil.Intents.from_dict(self.document)
        self.names: list[NameValue] = [
            NameValue(text=name, entity_id=e.entity_id, canonical=e.name, context=name_context(e))
            for e in catalog
            for name in e.names
        ]
        self.areas: list[str] = catalog.areas
        self.slot_lists: dict[str, Any] = {
            "name": TextSlotList(
                name="name",
                values=[
                    TextSlotValue(text_in=hassil.TextChunk(n.text), value_out=n.canonical, context=n.context)
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
        self._dfa: Dfa | None = None
        self._commands_dfa: Dfa | None = None
        self._spoken: dict[tuple[bool, bool], Dfa] = {}
        self._dfa_lock = threading.Lock()
        self.build_s = 0.0  # of the automaton (built on first use: text alone needs none)

    # -- automaton ------------------------------------------------------------------
    @property
    def dfa(self) -> Dfa:
        """The minimal word automaton of the closed sentences (built once, on first use)."""
        with self._dfa_lock:
            if self._dfa is None:
                started = time.perf_counter()
                self._dfa = self._compile()
                self.build_s = time.perf_counter() - started
                _LOGGER.info("grammar: %d names, %d areas -> %d states, %d words in %.2f s", len(self.names),
                             len(self.areas), self._dfa.num_states, len(self._dfa.words), self.build_s)
            return self._dfa

    @property
    def commands_dfa(self) -> Dfa:
        """The automaton without the answers to the hub's questions ("yes", "no", a room).

        What the grammar tier listens for while the hub asked nothing: short answers
        would otherwise attract any speech the grammar does not fit ("do not").
        """
        with self._dfa_lock:
            if self._commands_dfa is None:
                self._commands_dfa = self._compile(exclude=ANSWERS)
            return self._commands_dfa

    def spoken_dfa(self, *, answering: bool = False, overlapping: bool = False) -> Dfa:
        """The automaton Whisper decodes with: the wildcards kept as the word ``*`` (free text).

        Without ``answering``, the answers to the hub's questions are left out, as in
        :attr:`commands_dfa`. With ``overlapping`` (words said over the hub's voice), the
        phrases that stop it ("stop", "be quiet") and a listener's backchannels ("okay",
        "mm hmm") are sentences too: what is said over the hub is one of them or a command.
        """
        key = (answering, overlapping)
        with self._dfa_lock:
            dfa = self._spoken.get(key)
            if dfa is None:
                dfa = self._spoken[key] = self._compile(
                    exclude=frozenset() if answering else ANSWERS, wildcards=True,
                    phrases=STOP_PHRASES | BACKCHANNELS if overlapping else frozenset())
            return dfa

    def _compile(self, exclude: frozenset[str] = frozenset(), *, wildcards: bool = False,
                 phrases: frozenset[str] = frozenset()) -> Dfa:
        nfa = Nfa.empty()
        body_start, body_end = nfa.new_state(), nfa.new_state()
        # one of the words a request may start and end with ("hey ...", "... for me"); not two:
        # "can you please play *" took clean speech ("A new to media player are very really."
        # for "unmute media player our area") and played it (understanding bench, test half)
        nfa.add(0, "", body_start)
        for prefix in SKIP_PREFIXES:
            nfa.add_words(0, tokenize(prefix), body_start)
        nfa.add(body_end, "", nfa.final)
        for suffix in SKIP_SUFFIXES:
            nfa.add_words(body_end, tokenize(suffix), nfa.final)
        rules = dict(self.intents.expansion_rules)
        for intent in self.intents.intents.values():
            if intent.name in exclude:
                continue
            for data in intent.data:
                requires = dict(data.requires_context or {})
                excludes = dict(data.excludes_context or {})
                local_rules = {**rules, **(getattr(data, "expansion_rules", None) or {})}
                compiler = TemplateCompiler(nfa, local_rules, functools.partial(
                    self._list_values, requires=requires, excludes=excludes, data=data, wildcards=wildcards))
                for sentence in data.sentences:
                    compiler.add_sentence(sentence_expression(sentence), body_start, body_end)
        for phrase in phrases:
            nfa.add_words(body_start, tokenize(phrase), body_end)
        return minimize(nfa)

    def _list_values(
        self, ref: Any, requires: dict[str, Any], excludes: dict[str, Any], data: Any, wildcards: bool = False,
    ) -> list[list[str]] | list[Any] | None:
        name = ref.list_name
        if name == "name":
            return [tokenize(n.text) for n in self.names if context_ok(n.context, requires, excludes)]
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
        if wildcards and isinstance(slot_list, WildcardSlotList):
            return [[WILDCARD]]  # a list item, a message, a timer's name: free text
        return None  # a wildcard where free text cannot be decoded (the grammar tier)

    # -- queries ------------------------------------------------------------------------
    def is_complete(self, words: list[str]) -> bool:
        """Whether the words already form a full command."""
        return bool(words) and self.dfa.accepts(words)

    @property
    def vocabulary(self) -> set[str]:
        """Every word of the language."""
        return self.dfa.words
