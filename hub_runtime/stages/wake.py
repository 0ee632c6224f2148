"""Wake-word stage (optional): pymicro-wakeword opens a session.

Consumes: InputAudioFrame. Emits: WakeWordFrame (event ``wake_word``); forwards all.
The ASR restarts its utterance on the wake word, so the command is what follows it.
"""

from __future__ import annotations

from typing import Any, Final

from ..frames import Frame, InputAudioFrame, WakeWordFrame
from ..pipeline import Direction, Stage

REFRACTORY_MS: Final = 1500  # one utterance of the wake word is one detection


class WakeWordStage(Stage):
    """Listens for one of the bundled wake words."""

    def __init__(self, model: str) -> None:
        """Load the bundled model by name (okay_nabu, hey_jarvis, hey_mycroft, alexa)."""
        super().__init__("wake")
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

        self.model_name = model
        self._detector: Any = MicroWakeWord.from_builtin(Model(model))
        self._features: Any = MicroWakeWordFeatures()
        self._quiet_until_ms = -1

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Run the detector on audio; forward everything."""
        await self.push(frame, direction)
        if isinstance(frame, InputAudioFrame):
            for features in self._features.process_streaming(frame.audio.bytes):
                if self._detector.process_streaming(features) and frame.t_ms >= self._quiet_until_ms:
                    self._quiet_until_ms = frame.t_ms + REFRACTORY_MS
                    self._detector.reset()
                    self.emit("wake_word", name=self.model_name)
                    await self.push(WakeWordFrame(name=self.model_name))
