"""Intent recognition on text: Home Assistant's own matcher over its templates, targets resolved.

Recognition is what Home Assistant's default conversation agent does: hassil's
``recognize_best`` over Home Assistant's English templates, with the home's names (and
their domain and device class, which templates may require), areas and floors as slot
lists, and the hub's room (``site_area``) as the intent context. So a typed sentence gets
the intent Home Assistant itself would give it.

Sentences that mean "here" ("turn off the lights in here", "pause") need the hub's room.
Without a ``site_area`` they are matched with a placeholder room; when the targets then
lie in more than one room the intent carries ``needs_area`` (the hub asks "Which room?"),
otherwise the one room there is, is meant.
"""

from __future__ import annotations

import itertools
import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any, Final

import hassil

from .catalog import Catalog, Entity
from .grammar import SKIP_PREFIXES, SKIP_SUFFIXES, HomeGrammar
from .grammar.automaton import _ONES, _TENS, NUMBER_WORDS
from .protocol import IntentData
from .smalltalk import is_local
from .text import text_words

_LOGGER = logging.getLogger(__name__)

HERE: Final = "\u2063here"  # the placeholder room for sentences that need the hub's own
CUSTOM_SENTENCE_KEY: Final = "hass_custom_sentence"  # as Home Assistant's default agent
_ONE_HALF_RE: Final = re.compile(r"\bone half\b", re.IGNORECASE)
_UNITS: Final = {w: i for i, w in enumerate(_ONES)}
_TENS_MAP: Final = {w: i * 10 for i, w in enumerate(_TENS) if w != "_"}
_SPACE_RE: Final = re.compile(r"\s+")
_PUNCT_RE: Final = re.compile(r"[.!?,;]+$")
# Hesitations, anywhere ("turn on the, uh, kitchen light"), and the words a spoken request
# often opens with ("Okay, turn off the kitchen light.", "So, what time is it?"): when the
# words as said match nothing, they are tried without them (never part of a template's words
# there: a name that has one still matches as said, first)
FILLERS: Final = frozenset({"um", "umm", "uh", "uhm", "uhh", "er", "erm", "hmm", "mm"})
LEAD_INS: Final = (("all", "right"), ("alright",), ("okay",), ("ok",), ("so",), ("well",), ("oh",), ("now",),
                   ("right",), ("yeah",))  # not "and": a recogniser's "add" ("And milk to the list.")
# Actions whose opposite is "un" + the word: a recogniser writes a quick "un" as a word of its
# own ("Um, pause the music.", "And pause TV." for "unpause"), so no word before them is dropped
UN_STEMS: Final = frozenset({"mute", "pause", "lock"})
_WORD_EDGE_RE: Final = re.compile(r"^[^\w']+|[^\w']+$")
# Domains an intent acts on when its template names none (Home Assistant's handlers).
INTENT_DOMAINS: Final[dict[str, tuple[str, ...]]] = {
    "HassLightSet": ("light",),
    "HassClimateGetTemperature": ("climate",),
    "HassClimateSetTemperature": ("climate",),
    "HassClimateSetFanMode": ("climate",),
    "HassSetPosition": ("cover", "valve"),
    "HassFanSetSpeed": ("fan",),
    "HassMediaPause": ("media_player",),
    "HassMediaUnpause": ("media_player",),
    "HassMediaNext": ("media_player",),
    "HassMediaPrevious": ("media_player",),
    "HassSetVolume": ("media_player",),
    "HassSetVolumeRelative": ("media_player",),
    "HassMediaPlayerMute": ("media_player",),
    "HassMediaPlayerUnmute": ("media_player",),
    "HassMediaSearchAndPlay": ("media_player",),
    "HassVacuumStart": ("vacuum",),
    "HassVacuumReturnToBase": ("vacuum",),
    "HassVacuumCleanArea": ("vacuum",),
    "HassLawnMowerStartMowing": ("lawn_mower",),
    "HassLawnMowerDock": ("lawn_mower",),
    "HassGetWeather": ("weather",),
    "HassListAddItem": ("todo",),
    "HassListCompleteItem": ("todo",),
    "HassListRemoveItem": ("todo",),
    "HassShoppingListAddItem": ("todo",),
    "HassShoppingListCompleteItem": ("todo",),
}
# Intents with no entity to act on (timers are the hub's own, not entities).
UNTARGETED: Final = frozenset({
    "HassGetCurrentDate", "HassGetCurrentTime", "HassNevermind", "HassRespond", "HassBroadcast",
    "HassStartTimer", "HassCancelTimer", "HassCancelAllTimers", "HassIncreaseTimer", "HassDecreaseTimer",
    "HassPauseTimer", "HassUnpauseTimer", "HassTimerStatus",
})
# Media intents act only on the players in the state they change (as Home Assistant's handlers).
MEDIA_STATES: Final = {"HassMediaPause": "playing", "HassMediaUnpause": "paused", "HassMediaNext": "playing",
                       "HassMediaPrevious": "playing"}
SHOPPING_LIST: Final = "shopping list"


def words_to_digits(text: str) -> str:
    """Turn spelled numbers into digits: "set it to fifty five percent" -> "... 55 percent".

    "one half" is written "1/2", as Home Assistant's timer sentences take it.
    """
    text = _ONE_HALF_RE.sub("1/2", text)
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
        if word in NUMBER_WORDS:
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


def without_fillers(text: str) -> str:
    """``text`` without hesitations and without the lead-in words before a request (at least one word is kept)."""
    said = text.split()
    bare = [_WORD_EDGE_RE.sub("", w).lower() for w in said]
    if any(b in FILLERS and after in UN_STEMS for b, after in itertools.pairwise(bare)):
        return text  # "um pause" may be "unpause" heard
    words = [w for w, b in zip(said, bare, strict=True) if b not in FILLERS]
    bare = [b for b in bare if b not in FILLERS]
    start = 0
    while lead := next((n for n in LEAD_INS
                        if tuple(bare[start : start + len(n)]) == n and len(bare) - start > len(n)), None):
        start += len(lead)
    return " ".join(words[start:]) if words else text


OPENING_WORDS: Final = FILLERS | {w for lead in LEAD_INS for w in lead}


def only_opening(text: str) -> bool:
    """Whether ``text`` is only hesitations and lead-in words ("So.", "Okay, um"): a request may follow."""
    words = text_words(text)
    return bool(words) and all(w in OPENING_WORDS for w in words)


def normalize(text: str) -> str:
    """Text as the matcher takes it: one space between words, no end punctuation."""
    return _SPACE_RE.sub(" ", _PUNCT_RE.sub("", text.strip())).strip()


@dataclass(frozen=True)
class Intent:
    """A recognised home intent with its targets resolved."""

    name: str
    slots: dict[str, Any]  # values, as an intent handler gets them
    targets: list[str]
    text: str
    response_key: str = "default"
    slot_texts: dict[str, Any] = field(default_factory=dict)  # as they were said (for replies)
    error: str | None = None  # why the targets could not be resolved (a response error key)
    error_args: dict[str, Any] = field(default_factory=dict)
    needs_area: bool = False  # a "here" sentence, and the hub's room is unknown: ask which

    def to_data(self) -> IntentData:
        """The intent as it goes over MQTT."""
        return IntentData(name=self.name, slots=dict(self.slots), targets=tuple(self.targets))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape used by ``ask`` and the events."""
        return self.to_data().to_dict()


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class Nlu:
    """Recognises intents in text for one home."""

    def __init__(self, grammar: HomeGrammar, catalog: Catalog) -> None:
        """Match against this grammar; resolve targets in this catalog."""
        self.grammar = grammar
        self.catalog = catalog
        # Home Assistant's, and the ones the recognisers' grammar lets a sentence start or end
        # with: "hey, turn on the kitchen light" is heard, so it must be understood
        self._skip_words = list(dict.fromkeys([*grammar.document.get("skip_words", []), *SKIP_PREFIXES,
                                               *SKIP_SUFFIXES]))

    def recognize(self, text: str) -> Intent | None:
        """The best intent for the text, or None when it is not a home command."""
        clean = normalize(text)
        if not clean:
            return None
        site = self.grammar.site_area
        result = self._best(clean, site)
        placeholder = False
        if result is None and site is None:
            result = self._best(clean, HERE)
            placeholder = result is not None
        if result is None:
            digits = words_to_digits(clean)  # numbers the recogniser spelled ("fifty percent")
            if digits != clean:
                return self.recognize(digits)
            plain = normalize(without_fillers(clean))
            if plain != clean:
                return self.recognize(plain)
            return None
        return self._resolve(result, text, placeholder=placeholder)

    def _best(self, text: str, area: str | None) -> Any:
        context = {"area": {"value": area, "text": area}} if area else None
        try:
            return hassil.recognize_best(
                text, self.grammar.intents, slot_lists=self.grammar.slot_lists, skip_words=self._skip_words,
                intent_context=context, language=self.grammar.language,
                best_metadata_key=CUSTOM_SENTENCE_KEY, best_slot_name="name")
        except Exception:  # hassil raises on odd input; a miss, not a crash
            _LOGGER.exception("hassil failed on %r", text)
            return None

    def _resolve(self, result: Any, text: str, *, placeholder: bool) -> Intent:
        slots: dict[str, Any] = {}
        texts: dict[str, Any] = {}
        for key, entity in result.entities.items():
            value = entity.value
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            slots[key] = value
            texts[key] = entity.text or value
        requires = dict(result.intent_data.requires_context or {})
        intent = self.resolve(result.intent.name, slots, text, requires=requires,
                              response_key=result.response or "default", slot_texts=texts)
        if placeholder and slots.get("area") == HERE:
            return self._here(intent, requires)
        return intent

    def _here(self, intent: Intent, requires: dict[str, Any]) -> Intent:
        """A "here" sentence without a known room: one room is meant, or the user is asked."""
        slots = {k: v for k, v in intent.slots.items() if k != "area"}
        texts = {k: v for k, v in intent.slot_texts.items() if k != "area"}
        anywhere = self.resolve(intent.name, slots, intent.text, requires=requires,
                                response_key=intent.response_key, slot_texts=texts)
        if intent.name in UNTARGETED or anywhere.error:
            return anywhere  # a timer, say, or nothing to act on: no room to ask about
        rooms = {self._entity(t).area for t in anywhere.targets}
        if len(rooms) > 1:
            return replace(anywhere, needs_area=True)
        room = next(iter(rooms))
        return anywhere if room is None else self.with_area(intent, room, requires=requires)

    def _entity(self, entity_id: str) -> Entity:
        entity = self.catalog.get(entity_id)
        assert entity is not None
        return entity

    def with_area(self, intent: Intent, area: str, *, requires: dict[str, Any] | None = None) -> Intent:
        """The same intent in the given room (the answer to "Which room?")."""
        slots = {**intent.slots, "area": area}
        texts = {**intent.slot_texts, "area": area}
        return self.resolve(intent.name, slots, intent.text, requires=requires, response_key=intent.response_key,
                            slot_texts=texts)

    def resolve(self, name: str, slots: dict[str, Any], text: str, *, requires: dict[str, Any] | None = None,
                response_key: str = "default", slot_texts: dict[str, Any] | None = None) -> Intent:
        """Resolve an intent's slots (name, area, domain, device class, state) to the catalog's entities."""
        requires = requires or {}
        texts = dict(slot_texts or {})
        if name in UNTARGETED or is_local(name):
            return Intent(name=name, slots=slots, targets=[], text=text, response_key=response_key,
                          slot_texts=texts)
        domains = (_as_list(slots.get("domain")) or _as_list(requires.get("domain"))
                   or list(INTENT_DOMAINS.get(name, ())))
        wanted_name = slots.get("name")
        if name.startswith("HassShoppingList") and wanted_name is None:
            wanted_name = self._shopping_list()
        area = slots.get("area")
        device_class = slots.get("device_class")
        candidates = [e for e in self.catalog
                      if (not domains or e.domain in domains)
                      and (area is None or e.area == area)
                      and (device_class is None or e.attributes.get("device_class") == device_class)]
        if wanted_name is not None:
            wanted = str(wanted_name).casefold()
            candidates = [e for e in candidates if wanted in (n.casefold() for n in e.names)]
        if name == "HassClimateGetTemperature" and not candidates and wanted_name is None:
            candidates = [e for e in self.catalog if _is_temperature_sensor(e)
                          and (area is None or e.area == area)]
        error: str | None = None
        error_args: dict[str, Any] = {}
        if name in MEDIA_STATES and candidates:  # only what plays can pause (Home Assistant's rule)
            candidates = [e for e in candidates if e.state == MEDIA_STATES[name]]
            if not candidates:
                error, error_args = "entity_wrong_state", {"state": MEDIA_STATES[name]}
        elif not candidates:
            error, error_args = _no_target(wanted_name, area, device_class, domains)
        return Intent(name=name, slots=slots, targets=[e.entity_id for e in candidates], text=text,
                      response_key=response_key, slot_texts=texts, error=error, error_args=error_args)

    def _shopping_list(self) -> str | None:
        lists = [e for e in self.catalog if e.domain == "todo"]
        named = [e for e in lists if SHOPPING_LIST in (n.casefold() for n in e.names)]
        chosen = named or (lists if len(lists) == 1 else [])
        return chosen[0].name if chosen else "Shopping List"


def _is_temperature_sensor(entity: Entity) -> bool:
    unit = str(entity.attributes.get("unit_of_measurement", ""))
    return entity.domain == "sensor" and (entity.attributes.get("device_class") == "temperature"
                                          or unit in ("°C", "°F"))


def _no_target(name: Any, area: Any, device_class: Any, domains: list[str]) -> tuple[str, dict[str, Any]]:
    """Home Assistant's error key and arguments for a request that matched nothing."""
    where = "_in_area" if area else ""
    if name is not None:
        return "no_entity" + where, {"entity": name, "area": area}
    if device_class:
        return "no_device_class" + where, {"device_class": device_class, "area": area}
    if domains:
        return "no_domain" + where, {"domain": domains[0], "area": area}
    return "no_area" if area else "no_domain", {"area": area, "domain": "device"}
