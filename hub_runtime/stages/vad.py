"""VAD stage: scores every frame and runs the quiet → starting → speaking → stopping machine.

Consumes: InputAudioFrame (fills ``speech`` and ``probability``).
While the hub speaks, an :class:`EchoGate` keeps its own echo from counting as speech.

Emits: SpeechStartedFrame, SpeechStoppedFrame; forwards everything.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final

import numpy as np

from ..audio.native import frame_rms
from ..engines.base import SpeechScorer
from ..frames import Frame, InputAudioFrame, SpeechStartedFrame, SpeechStoppedFrame
from ..pipeline import Direction, Stage

ECHO_WINDOW_FRAMES: Final = 7  # reference frames an echo may lag behind (~210 ms)
ECHO_TAIL_FRAMES: Final = 15  # after the speaker falls silent, its echo still dies away (~450 ms)
# echo-to-reference ratios kept (~1 s of playback): the canceller converges within the first
# seconds of a reply, and an estimate that still holds them (3 s were kept before) missed the
# user's first 900 ms in 4 of 60 overlaps, none with 1 s and ECHO_LEARN_MAX (bench/echo.py's
# scenes, their levels replayed)
ECHO_STATS_FRAMES: Final = 33
ECHO_MIN_STATS: Final = 10  # ratios needed before speech can count during playback
ECHO_MARGIN: Final = 2.5  # the user must be this much louder than the expected echo
# A frame the VAD calls speech, louder than this times the expected echo but under the margin,
# is not learnt from: a word's rising start, which would lift the estimate above the word itself.
ECHO_LEARN_MAX: Final = 1.25
PLAYBACK_FLOOR_RMS: Final = 60.0  # reference below this is silence


def _rms(x: np.ndarray) -> float:
    return float(frame_rms(np.ascontiguousarray(x, dtype=np.int16)))


class EchoGate:
    """Keeps the hub's own (residual) echo from counting as user speech.

    While the speaker plays, the ratio of microphone level to recent playback level is
    learnt on frames that are not user speech (a high percentile over the last second of
    playback, kept across replies: the room does not change). A frame is speech only if it
    is ``ECHO_MARGIN`` times louder than that expected echo; a frame the VAD calls speech
    that is clearly louder than the echo but under the margin is not learnt from (the
    start of a word). In the first ``ECHO_WINDOW_FRAMES`` of playback nothing counts and
    nothing is learnt: the echo has not come back yet (measured on 40 replies to silence
    with a reply's first word in it: 4 paused the hub at 390-480 ms, none with this hold).
    When the speaker falls silent (between sentences, at the end), the echo dies away for a
    while: against the recent playback, the gate holds.
    """

    def __init__(self) -> None:
        """No echo learnt yet."""
        self._ref: deque[float] = deque(maxlen=ECHO_TAIL_FRAMES)
        self._ratios: deque[float] = deque(maxlen=ECHO_STATS_FRAMES)
        self._playing = 0  # frames since playback started (after a silence longer than the echo tail)

    def allows(self, mic: np.ndarray, reference: np.ndarray | None, speech: bool) -> bool:
        """Whether a frame the VAD called ``speech`` is really the user."""
        self._ref.append(_rms(reference) if reference is not None else 0.0)
        recent = list(self._ref)[-ECHO_WINDOW_FRAMES:]
        ref_level = max(recent)
        tail_level = max(self._ref)
        if tail_level < PLAYBACK_FLOOR_RMS:
            self._playing = 0
            return speech
        self._playing += 1
        if self._playing <= ECHO_WINDOW_FRAMES:  # the echo may not have come back yet: a ratio
            return False  # now would be too low, and the canceller has not heard this reply yet
        level = _rms(mic)
        if ref_level < PLAYBACK_FLOOR_RMS:  # the echo's tail: the gate holds, learning nothing
            expected = float(np.percentile(self._ratios, 90)) if self._ratios else 1.0
            return speech and level > ECHO_MARGIN * expected * tail_level
        ratio = level / ref_level
        if len(self._ratios) < ECHO_MIN_STATS:
            self._ratios.append(ratio)
            return False
        expected = float(np.percentile(self._ratios, 90))
        user = speech and ratio > ECHO_MARGIN * expected
        if not speech or ratio <= ECHO_LEARN_MAX * expected:
            self._ratios.append(ratio)
        return user


class VadState(enum.Enum):
    """Where the detector is."""

    QUIET = "quiet"
    STARTING = "starting"
    SPEAKING = "speaking"
    STOPPING = "stopping"


class VadStage(Stage):
    """Speech start/stop from per-frame scores."""

    def __init__(self, scorer: SpeechScorer, *, threshold: float, start_ms: int, stop_ms: int,
                 frame_ms: int) -> None:
        """Compare scores with ``threshold``; need ``start_ms``/``stop_ms`` sustained."""
        super().__init__("vad")
        self.scorer = scorer
        self.threshold = threshold
        self.start_ms, self.stop_ms, self.frame_ms = start_ms, stop_ms, frame_ms
        self.state = VadState.QUIET
        self.echo_gate = EchoGate()
        self._run_ms = 0
        self._edge_ms = 0
        self._since_playback = ECHO_TAIL_FRAMES + 1  # frames since the speaker last played

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Score audio frames; forward everything."""
        if isinstance(frame, InputAudioFrame):
            self._since_playback = 0 if frame.played else self._since_playback + 1
            frame.probability = self.scorer.score(frame.audio.samples_i16,
                                                  playing=self._since_playback <= ECHO_TAIL_FRAMES)
            frame.speech = self.echo_gate.allows(frame.audio.samples_i16, frame.reference,
                                                 frame.probability >= self.threshold)
            await self._step(frame)
        await self.push(frame, direction)

    async def _step(self, frame: InputAudioFrame) -> None:
        speech = frame.speech
        if self.state is VadState.QUIET:
            if speech:
                self.state, self._run_ms, self._edge_ms = VadState.STARTING, 0, frame.t_ms
        if self.state is VadState.STARTING:
            if not speech:
                self.state = VadState.QUIET
                return
            self._run_ms += self.frame_ms
            if self._run_ms >= self.start_ms:
                self.state = VadState.SPEAKING
                await self.push(SpeechStartedFrame(onset_ms=self._edge_ms))
            return
        if self.state is VadState.SPEAKING:
            if not speech:
                self.state, self._run_ms, self._edge_ms = VadState.STOPPING, 0, frame.t_ms
        if self.state is VadState.STOPPING:
            if speech:
                self.state = VadState.SPEAKING
                return
            self._run_ms += self.frame_ms
            if self._run_ms >= self.stop_ms:
                self.state = VadState.QUIET
                await self.push(SpeechStoppedFrame(offset_ms=self._edge_ms))
