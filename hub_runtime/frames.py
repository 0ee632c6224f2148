"""Every frame that moves through a dialogue loop.

Three kinds (as in Pipecat):

* :class:`SystemFrame` — urgent, processed ahead of queued data and never dropped:
  input audio, VAD events, partial transcripts, barge-in, interruption, errors.
* :class:`DataFrame` — ordered payload (transcripts, intents, reply text, TTS audio);
  dropped when the user interrupts.
* :class:`ControlFrame` — ordered signals; dropped on interruption unless
  ``uninterruptible`` (the end of a session is).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .audio.format import AudioChunk

_ids = itertools.count(1)


@dataclass
class Frame:
    """Base of all frames; ``id`` is unique in the process."""

    id: int = field(default_factory=lambda: next(_ids), init=False, repr=False)


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
    """One microphone frame; VAD fills ``speech`` (raw decision) and ``probability``."""

    audio: AudioChunk
    t_ms: int
    speech: bool = False
    probability: float = 0.0
    reference: Any = None  # int16 samples the speaker played in the same tick (for the AEC)


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
class PartialTranscriptFrame(SystemFrame):
    """The grammar tier's running hypothesis; ``complete`` if already a full command."""

    text: str
    complete: bool


@dataclass
class EndOfTurnFrame(SystemFrame):
    """Sent upstream by the turn stage: close the utterance (``discard`` a backchannel)."""

    discard: bool = False
    silence_ms: int = 0


@dataclass
class TranscriptFrame(DataFrame):
    """The final words of a user turn.

    ``tier`` is "grammar" (pocketsphinx over the home grammar), "snapped" (Whisper
    snapped onto the grammar) or "open" (Whisper's free transcript, outside the grammar).
    """

    text: str
    tier: str
    confidence: float
    open_text: str = ""


# -- understanding and replies -------------------------------------------------------------
@dataclass
class IntentFrame(DataFrame):
    """A recognised intent with its targets, as acted on."""

    intent: Any  # nlu.Intent
    source: str


@dataclass
class SpeakFrame(DataFrame):
    """Text for the hub to say."""

    text: str


@dataclass
class TTSAudioFrame(DataFrame):
    """Synthesised speech for the output; ``last`` closes the utterance."""

    audio: AudioChunk
    utterance: int
    text: str = ""
    last: bool = False


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

    ``done`` (optional) is set once the frame has passed the last stage.
    """

    done: Any = field(default=None, compare=False, repr=False)  # asyncio.Event


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
