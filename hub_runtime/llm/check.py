"""Checks on what the LLM says, before it is said.

SmolLM2-135M is a weak helper: it invents dates, numbers and device states, claims it
did things it cannot do, and sometimes writes garbled words. A sentence is spoken only if

* every number, year, time, month and weekday in it also appears in what the model was
  told (the prompt: time, states, the user's words);
* what it says about a device of the home matches the device's state;
* it does not claim an action (actions are the hub's, reported from what was done);
* its words are English words (the pronouncing dictionary), names of the home, or words
  of the prompt;
* it does not talk about the home at all — a device, a room, a kind of device or a
  reading (the templates answer those, from the real states; the model mixes them up:
  "a 21.5 degree difference between the office and outside");
* it does not repeat its instructions (five words in a row from the prompt).

Otherwise the hub says it is not sure.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Final

from ..catalog import Catalog

NOT_SURE: Final = "Sorry, I'm not sure about that."
_WORD_RE: Final = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_NUMBER_RE: Final = re.compile(r"\d+(?:[.,:]\d+)*")
_NUMBER_WORDS: Final = frozenset(
    "three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
    "eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "billion".split())
_TIME_WORDS: Final = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december am pm o'clock yesterday tomorrow tonight".split())
_CLAIM_RE: Final = re.compile(
    r"\b(i|i've|i have|i just|i'll|i will|i am|i'm)\s+(?:now\s+|just\s+|already\s+)?(turned|turning|switched|switching|"
    r"set|setting|opened|opening|closed|closing|locked|locking|unlocked|ordered|ordering|booked|booking|sent|"
    r"sending|called|calling|added|adding|started|starting|played|playing|paused|pausing|bought|scheduled|"
    r"reminded|dimmed|adjusted|changed|done)\b", re.I)
STATE_WORDS: Final = frozenset("on off open opened closed shut locked unlocked playing paused".split())
MAX_UNKNOWN_WORDS: Final = 0  # words outside the dictionary, the home and the prompt
ECHO_WORDS: Final = 5  # this many words in a row from the prompt: it repeats its instructions
# kinds of devices and readings: a sentence with one of them is about the home
HOME_WORDS: Final = frozenset(
    "light lights lamp lamps thermostat temperature temperatures degree degrees heating heater door doors lock "
    "locks locked unlocked window windows blind blinds shade shades curtain curtains garage fan fans switch "
    "switches plug tv television speaker vacuum mower sensor sensors humidity scene script timer timers "
    "brightness thermostats °c °f celsius fahrenheit".split())
CMUDICT: Final = "cmudict-en-us.dict"


@cache
def english_words() -> frozenset[str]:
    """The pronouncing dictionary's words (pocketsphinx's CMUdict, about 130,000)."""
    from pocketsphinx import get_model_path

    words: set[str] = set()
    path = Path(get_model_path()) / "en-us" / CMUDICT
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            word = line.split(" ", 1)[0]
            words.add(word.split("(", 1)[0].lower())
    return frozenset(words)


def problem(sentence: str, *, prompt: str, catalog: Catalog) -> str | None:
    """Why the sentence must not be said, or None when it may."""
    low = sentence.lower()
    told = prompt.lower()
    told_words = set(_WORD_RE.findall(told))
    for number in _NUMBER_RE.findall(low):
        if number not in told:
            return f"the number {number} is not in its context"
    for word in _WORD_RE.findall(low):
        if (word in _NUMBER_WORDS or word in _TIME_WORDS) and word not in told_words:
            return f"{word!r} is not in its context"
    if _CLAIM_RE.search(low):
        return "it claims an action"
    words = _WORD_RE.findall(low)
    if "°" in low or set(words) & HOME_WORDS:
        return "it talks about the home (the templates answer that)"
    home = {n.lower() for e in catalog for n in (*e.names, e.area or "") if n}
    if any(re.search(rf"\b{re.escape(name)}\b", low) for name in home):
        return "it talks about the home (the templates answer that)"
    told_text = " ".join(_WORD_RE.findall(told))
    for i in range(len(words) - ECHO_WORDS + 1):
        if " ".join(words[i:i + ECHO_WORDS]) in told_text:
            return "it repeats its instructions"
    for entity in catalog:
        for name in entity.names:
            at = low.find(name.lower())
            if at < 0:
                continue
            said = set(_WORD_RE.findall(low[at + len(name):at + len(name) + 24])) & STATE_WORDS
            if said and entity.state.lower() not in said and not (said & {"open", "opened"} and entity.state == "open"):
                return f"it says {entity.name} is {', '.join(sorted(said))} (it is {entity.state})"
    vocabulary = english_words()
    names = {w.lower() for e in catalog for n in (*e.names, e.area or "") for w in _WORD_RE.findall(n)}
    unknown = [w for w in _WORD_RE.findall(sentence)
               if w.lower() not in vocabulary and w.lower() not in names and w.lower() not in told_words
               and w.lower().split("'")[0] not in vocabulary]
    if len(unknown) > MAX_UNKNOWN_WORDS:
        return f"words that are not English: {', '.join(unknown[:3])}"
    if ":" in sentence and not re.search(r"\d:\d", sentence):
        return "a label, not speech"
    return None
