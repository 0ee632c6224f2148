"""Echo-cancellation stage: removes the hub's own voice from the microphone.

Consumes: InputAudioFrame with ``reference`` (what the speaker played this tick).
Emits: the same frame with cleaned audio; forwards everything.
"""

from __future__ import annotations

import logging

from ..audio.format import AudioChunk
from ..engines.speex_aec import SpeexEchoCanceller
from ..frames import Frame, InputAudioFrame
from ..pipeline import Direction, Stage

_LOGGER = logging.getLogger(__name__)


class AecStage(Stage):
    """Speex echo cancellation against the exact playback reference."""

    def __init__(self, frame_samples: int) -> None:
        """Frames of ``frame_samples``."""
        super().__init__("aec")
        self._aec = SpeexEchoCanceller(frame_samples)

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Clean audio frames; forward everything."""
        if isinstance(frame, InputAudioFrame) and frame.reference is not None:
            cleaned = self._aec.process(frame.audio.samples_i16, frame.reference)
            frame.audio = AudioChunk(cleaned)
        await self.push(frame, direction)

    async def cleanup(self) -> None:
        """Free the filter."""
        self._aec.close()
