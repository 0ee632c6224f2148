"""Output stage: the speaker's playback buffer, the one place that knows what was played.

The audio device pulls one frame per tick with :meth:`OutputStage.read_frame`; the
stage hands out buffered TTS audio (or silence) and announces, as frames sent both
upstream and downstream, what the speaker did: an utterance started or ended (and
whether the buffer is now drained), the words actually played, playback paused,
resumed or cancelled.

Consumes: TTSAudioFrame, BargeInFrame (pause), ResumeFrame, InterruptionFrame (flush).
Emits: BotStartedSpeakingFrame, BotStoppedSpeakingFrame, SpokenFrame,
PlaybackPausedFrame, PlaybackResumedFrame, PlaybackCancelledFrame.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..audio.format import Int16Array, samples_to_ms
from ..frames import (
    BargeInFrame,
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    Frame,
    PlaybackCancelledFrame,
    PlaybackPausedFrame,
    PlaybackResumedFrame,
    ResumeFrame,
    SpokenFrame,
    SystemFrame,
    TTSAudioFrame,
)
from ..pipeline import Direction, Stage


@dataclass
class _Piece:
    utterance: int
    samples: Int16Array
    last: bool
    text: str


class OutputStage(Stage):
    """Buffers synthesised speech and plays it out frame by frame."""

    def __init__(self) -> None:
        """An empty buffer."""
        super().__init__("output")
        self._queue: deque[_Piece] = deque()
        self._offset = 0  # samples of the head piece already played
        self._playing: int | None = None  # utterance whose audio has started
        self._paused = False
        self._speech_samples = 0  # of the current utterance, played so far

    def announce(self, frame: SystemFrame) -> None:
        """Tell the stages before (upstream) and the observers (downstream) what the speaker did."""
        self.send(frame, Direction.UPSTREAM)
        self.send(frame, Direction.DOWNSTREAM)

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Buffer audio and apply pause/resume."""
        if isinstance(frame, TTSAudioFrame):
            self._queue.append(_Piece(frame.utterance, frame.audio.samples_i16, frame.last, frame.text))
            return
        if isinstance(frame, BargeInFrame):
            if not self._paused:
                self._paused = True
                self.announce(PlaybackPausedFrame(onset_ms=frame.onset_ms, playing=self._playing is not None))
        elif isinstance(frame, ResumeFrame) and self._paused:
            self._paused = False
            self.announce(PlaybackResumedFrame())
        await self.push(frame, direction)

    async def on_interruption(self) -> None:
        """Drop everything buffered; report the cancelled reply and the words heard of it."""
        if self._queue and self._offset > 0 and not self._queue[0].last:
            head = self._queue[0]  # the words of the sentence that were played, roughly
            words = head.text.split()
            said = words[: int(len(words) * self._offset / max(1, len(head.samples)))]
            if said:
                self.announce(SpokenFrame(text=" ".join(said) + " —"))
        if self._queue or self._playing is not None:
            self.announce(PlaybackCancelledFrame(played_ms=samples_to_ms(self._speech_samples)))
        self._queue.clear()
        self._offset = 0
        self._playing = None
        self._paused = False

    def read_frame(self, n: int) -> Int16Array:
        """The next ``n`` samples for the speaker (silence when paused or empty)."""
        out = np.zeros(n, dtype=np.int16)
        filled = 0
        while not self._paused and filled < n and self._queue:
            piece = self._queue[0]
            if self._playing != piece.utterance:
                self._playing = piece.utterance
                self._speech_samples = 0
                self.announce(BotStartedSpeakingFrame(utterance=piece.utterance))
            take = min(n - filled, len(piece.samples) - self._offset)
            if take > 0:
                out[filled : filled + take] = piece.samples[self._offset : self._offset + take]
                filled += take
                self._offset += take
                self._speech_samples += take
            if self._offset >= len(piece.samples):
                self._queue.popleft()
                self._offset = 0
                if not piece.last:
                    self.announce(SpokenFrame(text=piece.text))
                else:
                    self._playing = None
                    self.announce(BotStoppedSpeakingFrame(utterance=piece.utterance, text=piece.text,
                                                          drained=not self._queue))
        return out
