"""Paraphrases: usual ways of saying a request that Home Assistant's templates miss.

"kill the porch light", "switch the telly off", "send the roomba home", "set a pasta timer
for ten minutes", "turn on the garden sprinkler" (a valve opens), "turn the volume up on the
TV", "it's too dark in the study". Each rewrite is a general English equivalence, tried one
at a time and three in a row at most, and the NLU reads the result; the fewest rewrites that
make a request win, and only when they all mean the same thing.

The hub never acts on a paraphrase at once (:class:`~.understanding.Understanding` asks "Do
you want me to turn off the Porch Light?", as for the LLM's proposals); a question that only
reads state is answered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Final

from .nlu import Intent
from .text import text_words

MAX_REWRITES: Final = 3

REWRITES: Final[tuple[tuple[re.Pattern[str], str], ...]] = tuple((re.compile(pattern), repl) for pattern, repl in (
    # verbs Home Assistant's templates do not have
    (r"\b(?:kill|cut|shut off|shut down|power off|power down|switch off)\b", "turn off"),
    (r"\b(?:power on|power up|fire up|flip on|light up)\b", "turn on"),
    # a valve or a cover is opened and closed: "turn on the sprinkler"
    (r"\bturn on\b", "open"),
    (r"\bturn off\b", "close"),
    # the particle after the thing: "switch the telly off", "turn the volume up on the TV"
    (r"\b(?:kill|cut|shut|switch|flip|turn|power) (.+?) (on|off|up|down)\b", r"turn \2 \1"),
    (r"^turn (up|down) (?=.*\bvolume\b)", r"\1 "),  # "up the volume on the tv"
    # names of things people use
    (r"\b(?:telly|television)\b", "tv"),
    (r"\bsend (.+?) (?:back )?(?:home|to (?:its |the )?(?:base|dock|charger|charging station))$", r"return \1 to base"),
    (r"\bsend (.+?) back$", r"return \1 to base"),
    # the name of a timer before it: "set a pasta timer for ten minutes"
    (r"\b(set|start|make|create) (?:a|an|the|my) ([a-z]+) timer for (.+)$", r"\1 a timer for \3 named \2"),
    # a wish said as a remark
    (r"^(?:it's|it is|its) (?:too |so |very |really |a bit |kind of )?(?:dark|gloomy) (?:in|at) (.+)$",
     r"turn on the lights in \1"),
))
_SPACE_RE: Final = re.compile(r"\s+")


def rewrites(text: str) -> Iterator[str]:
    """Each text one rewrite makes of ``text`` (normalised: lower case, no punctuation)."""
    for pattern, repl in REWRITES:
        new = _SPACE_RE.sub(" ", pattern.sub(repl, text, count=1)).strip()
        if new != text:
            yield new


def paraphrase(text: str, recognize: Callable[[str], Intent | None]) -> tuple[str, Intent] | None:
    """The request the fewest rewrites make of ``text``, with the words they made, else None.

    ``recognize``: the NLU; a rewrite it reads as a request that fails (no such device)
    does not count. Rewrites that make different requests at the fewest steps: None (ask
    nothing, guess nothing).
    """
    said = " ".join(text_words(text))
    frontier, seen = [said], {said}
    for _ in range(MAX_REWRITES):
        found: dict[tuple[object, ...], tuple[str, Intent]] = {}
        following = []
        for current in frontier:
            for new in rewrites(current):
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
