"""Paraphrases: usual ways of saying a request that Home Assistant's templates miss.

"kill the porch light", "switch the telly off", "send the roomba home", "set a pasta timer
for ten minutes", "turn on the garden sprinkler" (a valve opens), "turn the volume up on the
TV", "it's too dark in the study", "make it warmer in the hallway" (its thermostat's target
a step up), "dim the desk lamp", "switch the coffee machine on" (the Coffee Maker), "are the
blinds open". Each rewrite is a general English equivalence, tried one at a time and three
in a row at most, and the NLU reads the result; the fewest rewrites that make a request
win, and only when they all mean the same thing.

The hub never acts on a paraphrase at once (:class:`~.understanding.Understanding` asks "Do
you want me to turn off the Porch Light?", as for the LLM's proposals); a question that only
reads state is answered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final

from .catalog import Entity
from .nlu import Intent
from .smalltalk import ANSWERS, is_local
from .text import text_words

MAX_REWRITES: Final = 3
Rewrite = tuple[re.Pattern[str], str]  # a pattern and what replaces it

REWRITES: Final[tuple[Rewrite, ...]] = tuple((re.compile(pattern), repl) for pattern, repl in (
    # verbs Home Assistant's templates do not have
    (r"\b(?:kill|cut|shut off|shut down|power off|power down|switch off)\b", "turn off"),
    (r"\b(?:power on|power up|fire up|flip on|light up)\b", "turn on"),
    # a valve or a cover is opened and closed: "turn on the sprinkler"
    (r"\bturn on\b", "open"),
    (r"\bturn off\b", "close"),
    # the particle after the thing: "switch the telly off", "turn the volume up on the TV"
    (r"\b(?:kill|cut|shut|switch|flip|turn|power) (.+?) (on|off|up|down)\b", r"turn \2 \1"),
    (r"^turn (up|down) (?=.*\bvolume\b)", r"\1 "),  # "up the volume on the tv"
    # the volume said by how it sounds: "louder", "a bit quieter please"
    (r"^(?:make it |a (?:bit|little) |much )?louder(?: please)?$", "turn up the volume"),
    (r"^(?:make it |a (?:bit|little) |much )?(?:quieter|softer)(?: please)?$", "turn down the volume"),
    # names of things people use
    (r"\b(?:telly|television)\b", "tv"),
    (r"\bsend (.+?) (?:back )?(?:home|to (?:its |the )?(?:base|dock|charger|charging station))$", r"return \1 to base"),
    (r"\bsend (.+?) back$", r"return \1 to base"),
    (r"^stop (?:vacuuming|hoovering)$", "return the vacuum to base"),
    # the room said for its door: "open the garage"
    (r"^(open|close|shut) (the|my|our) garage$", r"\1 \2 garage door"),
    # the name of a timer before it: "set a pasta timer for ten minutes"
    (r"\b(set|start|make|create) (?:a|an|the|my) ([a-z]+) timer for (.+)$", r"\1 a timer for \3 named \2"),
    # a wish said as a remark
    (r"^(?:it's|it is|its) (?:too |so |very |really |a bit |kind of )?(?:dark|gloomy) (?:in|at) (.+)$",
     r"turn on the lights in \1"),
    # "put the porch light on", "put on the porch light", "start the coffee maker"
    (r"^put (.+?) on$", r"turn on \1"),
    (r"^put on (.+)$", r"turn on \1"),
    (r"^(?:start|run) (the|my|our) ", r"turn on \1 "),
    # "the tv up": its volume
    (r"^turn (up|down) (the|my|our) (.+)$", r"turn \1 \2 \3 volume"),
    # halves: "half brightness", "open the blinds halfway"
    (r"\bhalf (?:brightness|bright)$", "50 percent brightness"),
    (r"^(?:open|close|shut|raise|lower|set|put) (.+?) (?:halfway|half way|half open|half closed)$",
     r"set \1 position to 50 percent"),
    # the weather asked about as what it may do
    (r"^(?:is it|will it|is it going to|it is going to|is it gonna|are we going to get|is there going to be"
     r"|do you think it will) (?:rain|snow|be rainy|be sunny|be cold|be hot|be warm|be windy|any rain)"
     r"(?: today| now| later| this (?:morning|afternoon|evening))?$", "what's the weather"),
    (r"^(?:do i need|should i (?:take|bring)) (?:an umbrella|a coat|a jacket|sunscreen)(?: today)?$",
     "what's the weather"),
    (r"^(?:how is|how's|what is|what's) the weather (?:like )?(?:today|now|outside|out there)$", "what's the weather"),
    (r"^(?:how is|how's) the weather$", "what's the weather"),
    # a message for the whole house
    (r"^(?:tell|let) (?:everyone|everybody|the whole house|the house|the family)(?: know)?(?: that)? (.+)$",
     r"broadcast \1"),
    # "add" heard as "and" before an item for a list ("And eggs to the shopping list.")
    (r"^(?:and|an|had) (?=.+ (?:to|on|onto) .*\blist$)", "add "),
    # "how much time is left": on the timer
    (r"^how (?:much time|long) (?:is )?(?:left|remaining|to go)$", "how much time is left on my timer"),
    # a state asked of a kind without "any" or "all": "are the blinds open" asks whether any is
    # open, "are the doors locked" whether all are (the answer names the ones that differ)
    (r"^are the (.+) (on|open|unlocked|playing|running)$", r"are any \1 \2"),
    (r"^are the (.+) (off|closed|shut|locked)$", r"are all the \1 \2"),
))
# What people call a device by its kind (domain → words), when the home has one of that kind
KIND_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "vacuum": ("robot vacuum", "vacuum cleaner", "vacuum", "hoover"),
    "lawn_mower": ("robot mower", "lawn mower", "lawnmower", "mower"),
    "climate": ("thermostat", "heating", "heat", "air conditioning", "air conditioner", "ac"),
    "valve": ("sprinklers", "sprinkler", "valve"),
}
# Words for the same thing in a device's name: "the coffee machine" is the Coffee Maker
NAME_SYNONYMS: Final = tuple(frozenset(group.split()) for group in (
    "maker machine", "lamp light", "blinds shades", "blind shade", "fridge refrigerator", "sofa couch"))
# A warmth said as a wish or a remark ("make it warmer", "it's too cold in the hallway"):
# the thermostat's target one step up or down (``TEMPERATURE_STEP`` by its unit)
_WARMER: Final = (r"(?:make it (?:a (?:bit|little) )?(?:warmer|hotter)|turn up the (?:heat|heating|temperature)"
                  r"|(?:it's|it is|its) (?:too |so |very |really |a bit |a little |kind of )?(?:cold|chilly|freezing))")
_COOLER: Final = (r"(?:make it (?:a (?:bit|little) )?(?:cooler|colder)|turn down the (?:heat|heating|temperature)"
                  r"|(?:it's|it is|its) (?:too |so |very |really |a bit |a little |kind of )?(?:hot|warm|stuffy))")
TEMPERATURE_STEP: Final = {"°C": 1.0, "°F": 2.0}
# A light made brighter or dimmer: its brightness this many points of 100 up or down
BRIGHTNESS_STEP: Final = 25
MIN_DIM_PERCENT: Final = 5  # dimmed no lower than this (lower is off, which "dim" does not ask)
_SPACE_RE: Final = re.compile(r"\s+")


def kind_rewrites(only: Mapping[str, str]) -> tuple[Rewrite, ...]:
    """Rewrites of a kind's words to a name: ``only`` maps a domain to the name of its one device.

    "the vacuum" is the Roomba where the home has one vacuum; where it has two, no rewrite
    guesses which. A word for a kind is a thing only after "the", "my" or "our": "vacuum the
    living room" is an action.
    """
    out: list[Rewrite] = []
    for domain, name in only.items():
        words = "|".join(re.escape(word) for word in KIND_WORDS.get(domain, ()))
        if words:
            out.append((re.compile(rf"\b(the|my|our) (?:{words})\b"), rf"\1 {' '.join(text_words(name))}"))
    return tuple(out)


def name_rewrites(entities: Iterable[Entity]) -> tuple[Rewrite, ...]:
    """Rewrites of a name said with another word for one of its words ("the coffee machine") to the name.

    Only where that other name is no device's and only one device's name becomes it.
    """
    entities = list(entities)
    names = {tuple(text_words(n)) for e in entities for n in e.names}
    variants: dict[tuple[str, ...], set[str]] = {}
    for entity in entities:
        for name in entity.names:
            words = tuple(text_words(name))
            for i, word in enumerate(words):
                for group in NAME_SYNONYMS:
                    for other in group - {word} if word in group else ():
                        variant = (*words[:i], other, *words[i + 1:])
                        if variant not in names:
                            variants.setdefault(variant, set()).add(" ".join(words))
    return tuple((re.compile(rf"\b{re.escape(' '.join(variant))}\b"), next(iter(said)))
                 for variant, said in variants.items() if len(said) == 1)


def temperature_rewrites(entities: Iterable[Entity]) -> tuple[Rewrite, ...]:
    """Rewrites of a warmth wished for in a room ("make it warmer in the hallway") to its thermostat's new target.

    The target one step (``TEMPERATURE_STEP``) from the thermostat's present one; said
    without a room, or with "in here", the home's one thermostat. A thermostat without a target: no rewrite.
    """
    climates = [e for e in entities if e.domain == "climate"]
    out: list[Rewrite] = []
    for entity in climates:
        target = entity.attributes.get("temperature")
        if isinstance(target, bool) or not isinstance(target, int | float):
            continue
        unit = str(entity.attributes.get("temperature_unit") or entity.attributes.get("unit_of_measurement") or "°C")
        step = TEMPERATURE_STEP.get(unit, 1.0)
        name = " ".join(text_words(entity.name))
        area = re.escape(" ".join(text_words(entity.area or "")))
        places = [rf" (?:in|at) (?:the |my |our )?{area}"] if area else []
        if len(climates) == 1:  # the home's one thermostat, for wherever the hub is
            places.append("(?: in here)?")
        for wish, sign in ((_WARMER, 1), (_COOLER, -1)):
            value = f"{target + sign * step:g}"
            for place in places:
                out.append((re.compile(rf"^{wish}{place}$"), f"set the {name} to {value} degrees"))
    return tuple(out)


def brightness_rewrites(entities: Iterable[Entity]) -> tuple[Rewrite, ...]:
    """Rewrites of a light made brighter or dimmer ("dim the desk lamp", "make the porch light brighter").

    Its brightness ``BRIGHTNESS_STEP`` points up (at most 100) or down (not under
    ``MIN_DIM_PERCENT``), from its present one (a light on without one is at full). Only a
    light that is on: one that is off has no brightness to change. By its name, or by its
    room's lights when it is the one light on there ("dim the lights in the study").
    """
    lit = [e for e in entities if e.domain == "light" and e.state == "on"]
    by_area: dict[str, list[Entity]] = {}
    for entity in lit:
        if entity.area:
            by_area.setdefault(" ".join(text_words(entity.area)), []).append(entity)
    out: list[Rewrite] = []
    for entity in lit:
        raw = entity.attributes.get("brightness")
        level = 255 if raw is None else raw
        if isinstance(level, bool) or not isinstance(level, int | float):
            continue
        percent = round(float(level) * 100 / 255)
        name = " ".join(text_words(entity.name))
        things = [re.escape(" ".join(text_words(n))) for n in entity.names]
        area = " ".join(text_words(entity.area or ""))
        if area and by_area.get(area) == [entity]:
            things += [rf"{re.escape(area)} lights?", rf"lights? in (?:the |my |our )?{re.escape(area)}"]
        thing = rf"(?:the |my |our )?(?:{'|'.join(things)})"
        for verb, adjective, value in (("brighten", "brighter", min(100, percent + BRIGHTNESS_STEP)),
                                       ("dim", "dimmer|darker", max(MIN_DIM_PERCENT, percent - BRIGHTNESS_STEP))):
            if value != percent:
                said = f"set the {name} brightness to {value} percent"
                out.append((re.compile(rf"^(?:{verb}(?: down| up)? {thing}|make {thing} (?:a (?:bit|little) )?"
                                       rf"(?:{adjective}))$"), said))
    return tuple(out)


def rewrites(text: str, more: tuple[Rewrite, ...] = ()) -> Iterator[str]:
    """Each text one rewrite makes of ``text`` (normalised: lower case, no punctuation); ``more`` after the usual."""
    for pattern, repl in (*REWRITES, *more):
        new = _SPACE_RE.sub(" ", pattern.sub(repl, text, count=1)).strip()
        if new != text:
            yield new


def paraphrase(text: str, recognize: Callable[[str], Intent | None],
               only: Mapping[str, str] | None = None, home: tuple[Rewrite, ...] = ()) -> tuple[str, Intent] | None:
    """The request the fewest rewrites make of ``text``, with the words they made, else None.

    ``recognize``: the NLU; a rewrite it reads as a request that fails (no such device)
    does not count. Rewrites that make different requests at the fewest steps: None (ask
    nothing, guess nothing). ``only``: the home's one device of a kind (domain → name),
    for :func:`kind_rewrites`; ``home``: more rewrites of this home's names and states
    (:func:`name_rewrites`, :func:`temperature_rewrites`, :func:`brightness_rewrites`).
    """
    more = kind_rewrites(only or {}) + home
    said = " ".join(text_words(text))
    frontier, seen = [said], {said}
    for _ in range(MAX_REWRITES):
        found: dict[tuple[object, ...], tuple[str, Intent]] = {}
        following = []
        for current in frontier:
            for new in rewrites(current, more):
                if new in seen:
                    continue
                seen.add(new)
                following.append(new)
                intent = recognize(new)
                if intent is not None and intent.error is None:
                    meaning = (intent.name, tuple(sorted(intent.targets)),
                               tuple(sorted((k, str(v)) for k, v in intent.slots.items())))
                    found.setdefault(meaning, (new, intent))
        if found:
            return next(iter(found.values())) if len(found) == 1 else None
        frontier = following
    return None


def only_of_kind(entities: Iterable[Entity]) -> dict[str, str]:
    """The home's one device of each kind it has one of: domain → name (for :func:`kind_rewrites`)."""
    kinds: dict[str, list[str]] = {}
    for entity in entities:
        kinds.setdefault(entity.domain, []).append(entity.name)
    return {domain: names[0] for domain, names in kinds.items() if len(names) == 1}


def request_paraphrase(text: str, recognize: Callable[[str], Intent | None],
                       entities: Iterable[Entity]) -> tuple[str, Intent] | None:
    """:func:`paraphrase` for a request of the home: not an answer to a question, not the hub's small talk."""
    def request(words: str) -> Intent | None:
        intent = recognize(words)
        return None if intent is None or intent.name in ANSWERS or is_local(intent.name) else intent

    entities = list(entities)
    return paraphrase(text, request, only_of_kind(entities), name_rewrites(entities) + temperature_rewrites(entities)
                      + brightness_rewrites(entities))
