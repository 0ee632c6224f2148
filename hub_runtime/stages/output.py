"""Output stage: the speaker's playback buffer, the one place that knows what was played.

The audio device pulls one frame per tick with :meth:`OutputStage.read_frame`; the
stage hands out buffered TTS audio (or silence), counts every sample it has played
(``played_samples``, the echo canceller's reference) and reports ``tts_start`` /
``tts_end`` when an utterance's first and last samples reach the speaker.

Consumes: TTSAudioFrame, BargeInFrame (pause), ResumeFrame, InterruptionFrame (flush).
Events: ``tts_start``, ``tts_end``, ``barge_in``, ``tts_resumed``, ``tts_cancelled``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..audio.format import Int16Array
from ..frames import BargeInFrame, Frame, ResumeFrame, TTSAudioFrame
from ..pipeline import Direction, Stage
from .state import Activity, DialogueState


@dataclass
class _Piece:
    utterance: int
    samples: Int16Array
    last: bool
    text: str


class OutputStage(Stage):
    """Buffers synthesised speech and plays it out frame by frame."""

    def __init__(self, state: DialogueState, *, volume: float = 1.0) -> None:
        """Clear ``state.replying`` when a reply has been played or cancelled."""
        super().__init__("output")
        self.state = state
        self.volume = volume
        self._queue: deque[_Piece] = deque()
        self._offset = 0  # samples of the head piece already played
        self._playing: int | None = None  # utterance whose audio has started
        self.paused = False
        self.played_samples = 0  # every sample sent to the speaker (silence included)
        self.speech_samples = 0  # of which hub speech

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Buffer audio and apply pause/resume."""
        if isinstance(frame, TTSAudioFrame):
            self._queue.append(_Piece(frame.utterance, frame.audio.samples_i16, frame.last,
                                      frame.text))
        elif isinstance(frame, BargeInFrame):
            if not self.paused:
                self.paused = True
                self.emit("barge_in", onset_ms=frame.onset_ms, playing=self._playing is not None)
        elif isinstance(frame, ResumeFrame):
            if self.paused:
                self.paused = False
                self.emit("tts_resumed")
        await self.push(frame, direction)

    async def on_interruption(self) -> None:
        """Drop everything buffered; report the cancelled reply."""
        if self._queue or self._playing is not None or self.state.replying:
            self.emit("tts_cancelled", played_ms=round(self.speech_samples / 16))
        if self._queue and self._offset > 0 and not self._queue[0].last:
            head = self._queue[0]  # the words of the sentence that were played, roughly
            words = head.text.split()
            said = words[: int(len(words) * self._offset / max(1, len(head.samples)))]
            if said:
                self.state.spoken.add(" ".join(said) + " —")
        self._queue.clear()
        self._offset = 0
        self._playing = None
        self.paused = False
        self.state.replying = False
        self.state.activity = Activity.LISTENING

    @property
    def busy(self) -> bool:
        """Whether audio is buffered or playing."""
        return bool(self._queue) or self._playing is not None

    def read_frame(self, n: int) -> Int16Array:
        """The next ``n`` samples for the speaker (silence when paused or empty)."""
        out = np.zeros(n, dtype=np.int16)
        filled = 0
        while not self.paused and filled < n and self._queue:
            piece = self._queue[0]
            if self._playing != piece.utterance:
                self._playing = piece.utterance
                self.speech_samples = 0
                self.state.activity = Activity.SPEAKING
                self.emit("tts_start", utterance=piece.utterance)
            take = min(n - filled, len(piece.samples) - self._offset)
            if take > 0:
                chunk = piece.samples[self._offset : self._offset + take]
                if self.volume != 1.0:
                    chunk = np.clip(chunk * self.volume, -32768, 32767).astype(np.int16)
                out[filled : filled + take] = chunk
                filled += take
                self._offset += take
                self.speech_samples += take
            if self._offset >= len(piece.samples):
                self._queue.popleft()
                self._offset = 0
                if not piece.last:
                    self.state.spoken.add(piece.text)
                if piece.last:
                    self._playing = None
                    self.emit("tts_end", utterance=piece.utterance, text=piece.text)
                    if not self._queue:
                        self.state.replying = False
                        self.state.activity = Activity.IDLE
        self.played_samples += n
        return out
