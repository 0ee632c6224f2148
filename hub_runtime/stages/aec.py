"""Echo-cancellation stage: removes the hub's own voice from the microphone.

Consumes: InputAudioFrame with ``reference`` (what the speaker played this tick).
Emits: the same frame with cleaned audio; forwards everything.
"""

from __future__ import annotations

from ..audio.format import AudioChunk
from ..engines.base import EchoCanceller
from ..frames import Frame, InputAudioFrame
from ..pipeline import Direction, Stage


class AecStage(Stage):
    """Echo cancellation against the exact playback reference."""

    def __init__(self, canceller: EchoCanceller) -> None:
        """Cancel with this engine (one per stream)."""
        super().__init__("aec")
        self._aec = canceller

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Clean audio frames; forward everything."""
        if isinstance(frame, InputAudioFrame) and frame.reference is not None:
            frame.audio = AudioChunk(self._aec.process(frame.audio.samples_i16, frame.reference))
        await self.push(frame, direction)

    async def cleanup(self) -> None:
        """Free the filter."""
        self._aec.close()
