"""Wake-word stage (optional): pymicro-wakeword opens a session.

Consumes: InputAudioFrame. Emits: WakeWordFrame (event ``wake_word``); forwards all.
"""

from __future__ import annotations

from typing import Any

from ..frames import Frame, InputAudioFrame, WakeWordFrame
from ..pipeline import Direction, Stage


class WakeWordStage(Stage):
    """Listens for one of the bundled wake words."""

    def __init__(self, model: str) -> None:
        """Load the bundled model by name (okay_nabu, hey_jarvis, hey_mycroft, alexa)."""
        super().__init__("wake")
        from pymicro_wakeword import MicroWakeWord, Model

        self.model_name = model
        self._detector: Any = MicroWakeWord.from_builtin(Model(model))

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Run the detector on audio; forward everything."""
        await self.push(frame, direction)
        if isinstance(frame, InputAudioFrame):
            if self._detector.process_streaming(frame.audio.bytes):
                self.emit("wake_word", name=self.model_name)
                await self.push(WakeWordFrame(name=self.model_name))
