"""VAD stage: scores every frame and runs the quiet → starting → speaking → stopping machine.

Consumes: InputAudioFrame (fills ``speech`` and ``probability``).
Emits: SpeechStartedFrame, SpeechStoppedFrame (and events ``speech_start``, ``speech_end``);
forwards everything.
"""

from __future__ import annotations

import enum

from ..engines.vad import SpeechScorer
from ..frames import Frame, InputAudioFrame, SpeechStartedFrame, SpeechStoppedFrame
from ..pipeline import Direction, Stage


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
        self._run_ms = 0
        self._edge_ms = 0

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Score audio frames; forward everything."""
        if isinstance(frame, InputAudioFrame):
            frame.probability = self.scorer.score(frame.audio.samples_i16)
            frame.speech = frame.probability >= self.threshold
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
                self.emit("speech_start", onset_ms=self._edge_ms)
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
                self.emit("speech_end", offset_ms=self._edge_ms)
                await self.push(SpeechStoppedFrame(offset_ms=self._edge_ms))
