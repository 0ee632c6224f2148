"""webrtcvad (webrtcvad-wheels): 10 ms decisions smoothed over the last 80 ms into a ratio."""

from __future__ import annotations

from collections import deque
from typing import Final

from ..audio.format import RATE, Int16Array

WEBRTC_SUBFRAME: Final = RATE // 100  # 10 ms
SMOOTHING_FRAMES: Final = 8  # 10 ms decisions averaged for the ratio


class WebRtcScorer:
    """webrtcvad decisions per 10 ms, smoothed over the last 80 ms into a ratio."""

    def __init__(self, aggressiveness: int = 2) -> None:
        """Load webrtcvad at this mode (0..3)."""
        import webrtcvad

        self._vad = webrtcvad.Vad(aggressiveness)
        self._recent: deque[bool] = deque(maxlen=SMOOTHING_FRAMES)

    def score(self, frame: Int16Array, *, playing: bool = False) -> float:
        """The smoothed speech ratio after this frame."""
        for i in range(0, len(frame) - WEBRTC_SUBFRAME + 1, WEBRTC_SUBFRAME):
            sub = frame[i : i + WEBRTC_SUBFRAME]
            self._recent.append(self._vad.is_speech(sub.tobytes(), RATE))
        return sum(self._recent) / max(1, len(self._recent))

    def reset(self) -> None:
        """Forget the smoothing window."""
        self._recent.clear()
