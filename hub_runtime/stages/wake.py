"""Wake-word stage (optional): a detected wake word opens a session.

Consumes: InputAudioFrame. Emits: WakeWordFrame; forwards all.
The ASR restarts its utterance on the wake word, so the command is what follows it.
"""

from __future__ import annotations

from typing import Final

from ..engines.base import WakeWordDetector
from ..frames import Frame, InputAudioFrame, WakeWordFrame
from ..pipeline import Direction, Stage

REFRACTORY_MS: Final = 1500  # one utterance of the wake word is one detection


class WakeWordStage(Stage):
    """Listens for one wake word."""

    def __init__(self, detector: WakeWordDetector) -> None:
        """Listen with this detector."""
        super().__init__("wake")
        self.detector = detector
        self._quiet_until_ms = -1

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Run the detector on audio; forward everything."""
        await self.push(frame, direction)
        if isinstance(frame, InputAudioFrame) and self.detector.process(frame.audio.bytes) \
                and frame.t_ms >= self._quiet_until_ms:
            self._quiet_until_ms = frame.t_ms + REFRACTORY_MS
            self.detector.reset()
            await self.push(WakeWordFrame(name=self.detector.name))
