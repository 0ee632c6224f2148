"""The interfaces of the model engines (protocols): a new engine is one file that fits one.

Every engine here is synchronous and is called from a worker thread, one chunk, sentence
or token at a time, so that an interruption can cut in between; LLM engines stream
asynchronously and stop within one token when the caller stops iterating.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

from ..audio.format import Int16Array
from ..grammar.automaton import Dfa


class SpeechScorer(Protocol):
    """Scores one frame of audio for speech."""

    def score(self, frame: Int16Array, *, playing: bool = False) -> float:
        """Speech score of this frame, 0..1 (``playing``: the hub's voice, or its echo, may be in it)."""
        ...

    def reset(self) -> None:
        """Forget history."""
        ...


class Synth(Protocol):
    """A voice: text in, sentences of audio at the loop's rate out."""

    def sentences(self, text: str) -> Iterable[tuple[str, Int16Array]]:
        """Yield (sentence, audio), one sentence per step."""
        ...


@dataclass(frozen=True)
class Heard:
    """A sentence of the home grammar, as likely as Whisper found it."""

    words: tuple[str, ...]
    score: float  # log-probability, plus how well its length fits the speech (log-likelihood), less free text's cost
    forced: float  # what the grammar cost: summed over tokens, the best token's log-prob less this one's
    logprob: float = 0.0  # Whisper's log-probability of the sentence as written (less free text's cost)


@dataclass(frozen=True)
class WhisperResult:
    """A free transcript, its mean token log-probability, and the grammar's likeliest sentences."""

    text: str
    logprob: float
    sentences: tuple[Heard, ...] = ()  # best first, distinct words; empty without a grammar
    text_logprob: float | None = None  # the free text's log-probability, scored as the sentences are
    text_score: float | None = None  # ... and with its length's fit, as a sentence's ``score``
    agreed: bool = False  # the other recogniser's sentence, Whisper's own choice token by token (no search run)
    # the pass's encoding and what it decoded within, for :meth:`Transcriber.score_also` (opaque)
    encoding: Any = field(default=None, compare=False, repr=False)


# what a pass cancelled before it finished gives: nothing heard (its caller no longer wants it)
CANCELLED: Final = WhisperResult(text="", logprob=-10.0)


class Transcriber(Protocol):
    """Speech recognition of one utterance (the second tier): free, and within a grammar."""

    def transcribe(self, audio: npt.NDArray[np.float32], prompt: str = "", *, grammar: Dfa | None = None,
                   speech_s: float = 0.0, also: tuple[str, ...] = (),
                   rivals: Callable[[tuple[str, ...]], Iterable[tuple[str, ...]]] | None = None,
                   cancel: threading.Event | None = None) -> WhisperResult:
        """Transcribe float32 audio at the loop's rate with an optional initial prompt.

        With ``grammar``, also decode within its sentences; ``speech_s`` (how long the
        person spoke) lets the length of a sentence count; ``also`` is a sentence of the
        grammar to score as well (another recogniser's); ``rivals(best)``: sentences to
        score as well against the likeliest one, whatever the search found. Once ``cancel``
        is set, the pass may end early with whatever it has (a speculative pass that speech
        made stale).
        """

    def score_also(self, result: WhisperResult, also: tuple[str, ...]) -> WhisperResult:
        """``result`` as its pass would have been with ``also``: that sentence scored on its encoding.

        For another recogniser's sentence made out after the pass began (pocketsphinx's final
        words at the end of the turn). ``result`` unchanged when it holds no encoding, did not
        decode within a grammar, or has the sentence already.
        """
        ...

    def prepare(self, grammar: Dfa) -> None:
        """Get ready to decode within ``grammar`` (slow: a worker thread), so that its first utterance is not."""
        ...


class WakeWordDetector(Protocol):
    """Spots one wake word in a stream of audio."""

    name: str

    def process(self, pcm: bytes) -> bool:
        """Feed raw 16-bit PCM; True when the wake word ends in it."""
        ...

    def reset(self) -> None:
        """Forget state after a detection."""
        ...


class EchoCanceller(Protocol):
    """Removes the speaker's echo from microphone frames."""

    def process(self, mic: Int16Array, reference: Int16Array) -> Int16Array:
        """The mic frame without the echo of ``reference`` (played in the same tick)."""
        ...

    def close(self) -> None:
        """Free native state."""
        ...


# -- LLM ------------------------------------------------------------------------------------
class EngineError(RuntimeError):
    """The engine could not answer (missing model, server down, timeout)."""


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str  # system | user | assistant
    content: str


@dataclass
class Stats:
    """Figures of the last generation."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # of the prompt, reused from the previous evaluation
    generated_tokens: int = 0
    prompt_s: float = 0.0  # until the first token
    total_s: float = 0.0
    cancelled: bool = False
    dropped_turns: int = 0  # history pairs dropped to fit the context
    history: list[tuple[int, int]] = field(default_factory=list)  # (prompt, cached) per call


@dataclass(frozen=True)
class Sampling:
    """How to sample."""

    max_new_tokens: int = 64
    temperature: float = 0.7
    repetition_penalty: float = 1.2
    seed: int | None = None


class LlmEngine(Protocol):
    """A chat model: count the tokens of a chat, stream a completion."""

    name: str
    context_size: int
    stats: Stats

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt these messages make."""
        ...

    def stream(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
               budget: int | None = None) -> AsyncGenerator[str, None]:
        """Text pieces as they are generated.

        With ``budget`` the oldest history pairs are dropped until the prompt fits
        (``stats.dropped_turns`` says how many).
        """
        ...

    async def close(self) -> None:
        """Free resources (a child process, a connection)."""
        ...


def fit(count: Callable[[Sequence[Message]], int], messages: Sequence[Message],
        budget: int) -> tuple[list[Message], int]:
    """Drop the oldest history pairs (then cut the last message) until the prompt fits ``budget``."""
    msgs = list(messages)
    dropped = 0
    while count(msgs) > budget and len(msgs) > 2:
        del msgs[1:3]  # the system prompt stays; the oldest user/assistant pair goes
        dropped += 1
    while count(msgs) > budget and len(msgs[-1].content) > 1:
        last = msgs[-1]
        msgs[-1] = Message(last.role, last.content[len(last.content) // 2:])
    while count(msgs) > budget and len(msgs[0].content) > 1:  # a system prompt larger than the context
        first = msgs[0]
        msgs[0] = Message(first.role, first.content[: len(first.content) // 2])
    return msgs, dropped
