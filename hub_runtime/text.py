"""Text as the hub speaks and hears it: one sentence splitter for every use."""

from __future__ import annotations

import re
from typing import Final

# a sentence ends at . ! or ? (closing quotes or brackets may follow) before white space
SENTENCE_END: Final = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones left out."""
    return [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]


def complete_sentences(pending: str) -> tuple[list[str], str]:
    """Streaming text: (the sentences already complete, the unfinished rest)."""
    parts = SENTENCE_END.split(pending)
    return [p.strip() for p in parts[:-1] if p.strip()], parts[-1]


QUESTION_START: Final = frozenset(
    "is are was were what what's whats which who who's when where why how do does did has have can could "
    "will would".split())


def is_question(words: list[str], text: str = "") -> bool:
    """Words heard as a question ("is the light on", "what ...?"): they must never become a command."""
    return text.rstrip().endswith("?") or (bool(words) and words[0] in QUESTION_START)


BACKCHANNELS: Final = frozenset({
    "yeah", "yes", "yep", "yup", "okay", "ok", "right", "alright", "all right", "sure", "mm hmm", "mhm",
    "uh huh", "i see", "got it", "cool", "great", "nice", "really", "wow", "oh", "ah", "hmm", "mm",
    "yeah yeah", "okay okay", "right right", "i know", "of course", "exactly", "true", "fine",
    # a listener's thanks mid-answer; and Whisper's usual reading of a short unclear sound
    # ("uh huh" over the echo → "Thank you.")
    "thank you", "thanks",
})


# said over the hub, these only stop it
STOP_PHRASES: Final = frozenset({
    "stop", "stop it", "stop talking", "cancel", "be quiet", "quiet", "shut up", "never mind", "nevermind",
    "enough", "that's enough", "thats enough", "ok stop", "okay stop", "please stop", "stop please", "wait",
    "hold on", "wait a second", "hang on", "silence", "no stop", "that's it", "thank you stop",
})


_HUMS: Final = re.compile(r"^(?:[mh]*m[mh]*|u+h+|uh+ ?huh|mm+ ?hmm+)$")  # "mmm", "hmm", "mhm", "uh huh"


_WORD_RE: Final = re.compile(r"[a-z0-9']+")


def text_words(text: str) -> list[str]:
    """The words of a turn: lower case, punctuation dropped ("Kill the porch-light!" → kill the porch light)."""
    return _WORD_RE.findall(text.lower().replace("’", "'"))


def is_backchannel(text: str) -> bool:
    """A listener's "mm hmm": it tells the hub to go on, not to stop (unless the hub asked something)."""
    said = " ".join(re.findall(r"[a-z']+", text.lower()))
    return said in BACKCHANNELS or bool(said and all(_HUMS.match(w) for w in said.split()))
