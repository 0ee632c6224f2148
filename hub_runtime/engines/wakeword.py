"""Wake words with pymicro-wakeword (okay_nabu, hey_jarvis, hey_mycroft, alexa bundled)."""

from __future__ import annotations

from typing import Any, Final

WAKE_WORDS: Final = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")


class MicroWakeWordDetector:
    """One bundled wake word over 16 kHz int16 audio, fed in any frame size."""

    def __init__(self, model: str) -> None:
        """Load the bundled model by name."""
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model

        self.name = model
        self._detector: Any = MicroWakeWord.from_builtin(Model(model))
        self._features: Any = MicroWakeWordFeatures()

    def process(self, pcm: bytes) -> bool:
        """Feed raw PCM; True when the wake word ends in it."""
        heard = False
        for features in self._features.process_streaming(pcm):
            heard |= bool(self._detector.process_streaming(features))
        return heard

    def reset(self) -> None:
        """Forget the detector's state (after a detection)."""
        self._detector.reset()
