"""Every frame that moves through a dialogue loop.

Three kinds (as in Pipecat):

* :class:`SystemFrame` — urgent, processed ahead of queued data and never dropped:
  input audio, VAD events, partial transcripts, barge-in, interruption, what the
  speaker did, errors.
* :class:`DataFrame` — ordered payload (transcripts, intents, reply text, TTS audio);
  dropped when the user interrupts.
* :class:`ControlFrame` — ordered signals; dropped on interruption unless
  ``uninterruptible`` (the end of a session is).

Facts cross the loop only as frames. The events other devices see are derived from them
in one place (``events.py``); what the hub is doing is derived from them by one owner
(``status.py``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .audio.format import AudioChunk, Int16Array

if TYPE_CHECKING:
    from .nlu import Intent

_ids = itertools.count(1)


@dataclass
class Frame:
    """Base of all frames; ``id`` is unique in the process."""

    id: int = field(default_factory=lambda: next(_ids), init=False, repr=False, compare=False)


@dataclass
class SystemFrame(Frame):
    """Urgent; never dropped by an interruption."""


@dataclass
class DataFrame(Frame):
    """Ordered payload; dropped by an interruption."""


@dataclass
class ControlFrame(Frame):
    """Ordered signal; dropped by an interruption unless uninterruptible."""

    uninterruptible: bool = field(default=False, init=False)


# -- audio in, VAD, ASR -------------------------------------------------------------------
@dataclass
class InputAudioFrame(SystemFrame):
    """One microphone frame; VAD fills ``speech`` (gated decision), ``probability`` and ``voices``.

    ``reference`` is what the speaker played in the same tick (the echo canceller's
    reference; all zeros while the hub is silent).
    """

    audio: AudioChunk
    t_ms: int
    speech: bool = False
    probability: float = 0.0
    reference: Int16Array | None = None
    voices: bool = False  # speech the VAD heard that the talker gate held as other voices (a TV)

    @functools.cached_property
    def played(self) -> bool:
        """Whether the speaker played anything in this tick (asked by the VAD and the ASR)."""
        return self.reference is not None and bool(np.any(self.reference))


@dataclass
class SpeechStartedFrame(SystemFrame):
    """The VAD heard sustained speech; ``onset_ms`` is when it began."""

    onset_ms: int


@dataclass
class SpeechStoppedFrame(SystemFrame):
    """The VAD heard sustained silence; ``offset_ms`` is when speech ended."""

    offset_ms: int


@dataclass
class WakeWordFrame(SystemFrame):
    """The wake word was heard; a session opens."""

    name: str


@dataclass
class SessionFrame(SystemFrame):
    """Open (or close) a session from outside: speech is addressed to the hub without a wake word."""

    open: bool = True
    question: str = ""  # what the hub asked: context for hearing the answer ("Which room?")


@dataclass
class PartialTranscriptFrame(SystemFrame):
    """The running hypothesis; ``complete`` if already a full command.

    The grammar tier's words as they come; ``checked``: the second tier's verdict on a pause
    (after a :class:`CheckingFrame`), ``complete`` only when it is sure of a full command.
    """

    text: str
    complete: bool
    checked: bool = False


@dataclass
class CheckingFrame(SystemFrame):
    """The user paused: the second tier checks whether the words so far are a full command (a verdict follows)."""


@dataclass
class EndOfTurnFrame(SystemFrame):
    """Sent upstream by the turn stage: close the utterance (``discard``: not a turn to answer)."""

    discard: bool = False
    silence_ms: int = 0
    undecided: bool = False  # short speech over the hub that the grammar did not make out: playback
    #                          stays paused and the transcript decides (stop, go on, or a new turn)
    blip: bool = False  # speech over the hub too short for the VAD to open a turn: its pre-roll
    #                     is transcribed, and only a stop phrase in it stops the hub (else it goes on)


@dataclass
class TranscriptFrame(DataFrame):
    """The final words of a user turn.

    ``tier`` is "grammar" (a sentence of the home grammar: Whisper's within it, or
    pocketsphinx's alone when Whisper is off), "open" (Whisper's free transcript, outside
    the grammar) or "typed" (text from the dashboard, handled as if spoken). ``unsure``:
    another sentence that means something else was nearly as likely; ask before acting.
    """

    text: str
    tier: str
    confidence: float
    open_text: str = ""
    grammar_text: str | None = None
    grammar_confidence: float | None = None
    overlapped: bool = False  # said over the hub's own voice (a barge-in)
    paused: bool = False  # the hub's reply is paused until these words decide (``undecided`` turn)
    unsure: bool = False  # heard, but not surely: the understanding asks before it acts


# -- understanding and replies -------------------------------------------------------------
@dataclass
class SayFrame(DataFrame):
    """Text the hub was asked to say (MQTT ``say``, a timer's end); the router replies with it."""

    text: str
    chime: bool = False  # a chime first (a timer's end)


@dataclass
class IntentFrame(DataFrame):
    """A recognised intent, published before it is carried out (a controller may execute it)."""

    intent: Intent
    intent_id: str
    source: str  # grammar | llm
    text: str = ""
    confidence: float = 1.0
    call: str | None = None  # the LLM's call, as it wrote it


@dataclass
class SpeakFrame(DataFrame):
    """One piece of reply text for the voice."""

    text: str
    chime: bool = False  # a chime before the words


@dataclass
class ResponseFrame(DataFrame):
    """The whole reply to a turn, after its SpeakFrames (empty when nothing is said)."""

    text: str
    source: str | None = None  # grammar | llm | None (nothing matched)
    expects_reply: bool = False  # the reply asks the user something


@dataclass
class TTSAudioFrame(DataFrame):
    """Synthesised speech for the output; ``last`` closes the utterance."""

    audio: AudioChunk
    utterance: int
    text: str = ""
    last: bool = False


# -- what the speaker did (the output stage announces these, upstream and downstream) --------
@dataclass
class BotStartedSpeakingFrame(SystemFrame):
    """The first sample of an utterance reached the speaker."""

    utterance: int


@dataclass
class BotStoppedSpeakingFrame(SystemFrame):
    """The last sample of an utterance was played; ``drained``: nothing more is queued."""

    utterance: int
    text: str = ""
    drained: bool = True


@dataclass
class SpokenFrame(SystemFrame):
    """Words the speaker actually played: a sentence, or the part of one before a cut."""

    text: str


@dataclass
class PlaybackPausedFrame(SystemFrame):
    """Playback paused for a barge-in (``playing``: audio was playing)."""

    onset_ms: int
    playing: bool


@dataclass
class PlaybackResumedFrame(SystemFrame):
    """Playback resumed after a backchannel."""


@dataclass
class PlaybackCancelledFrame(SystemFrame):
    """The reply was dropped for good after ``played_ms`` of it."""

    played_ms: int


@dataclass
class TimerFrame(SystemFrame):
    """A timer changed: ``started``, ``updated``, ``paused``, ``resumed``, ``cancelled``, ``finished``."""

    action: str
    timer_id: str
    seconds_left: int
    name: str | None = None
    area: str | None = None


# -- barge-in --------------------------------------------------------------------------------
@dataclass
class BargeInFrame(SystemFrame):
    """The user started talking over the hub: pause playback (may still resume)."""

    onset_ms: int


@dataclass
class ResumeFrame(SystemFrame):
    """It was a backchannel or a noise: resume playback where it paused."""


@dataclass
class InterruptionFrame(SystemFrame):
    """The user took the turn: cancel in-flight work, flush queued data, stop playback.

    ``done`` (optional) is set once the frame has passed the last stage, or could not.
    """

    done: asyncio.Event | None = field(default=None, compare=False, repr=False)


@dataclass
class ArbitrationFrame(DataFrame):
    """Several rooms heard one utterance: the loudest answers (``winner``), the others stay silent."""

    winner: str
    candidates: list[tuple[str, float, str]]  # (site, level in dBFS, what it heard)
    answered: bool  # this room answers


# -- errors and life cycle -------------------------------------------------------------------
@dataclass
class ErrorFrame(SystemFrame):
    """Something failed; the loop goes on."""

    message: str
    fatal: bool = False


@dataclass
class EndFrame(ControlFrame):
    """The end of the session; never dropped."""

    def __post_init__(self) -> None:
        """Mark uninterruptible."""
        self.uninterruptible = True
