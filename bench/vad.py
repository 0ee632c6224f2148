"""Frame-level VAD accuracy: Silero vs webrtcvad on synthetic commands with noise.

Ground truth is the clean utterance's frame energy; the detectors see it mixed with
pink noise at several levels. Prints accuracy and F1 per engine and noise level.
Usage: .venv/bin/python bench/vad.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from commands import cases

from hub_runtime.audio.synthetic import pink_noise, speak
from hub_runtime.engines.base import SpeechScorer
from hub_runtime.engines.silero_vad import SileroScorer
from hub_runtime.engines.webrtc_vad import WebRtcScorer


def make_scorer(engine: str) -> SpeechScorer:
    return WebRtcScorer(2) if engine == "webrtcvad" else SileroScorer()

FRAME = 480


def labels(clean: np.ndarray) -> np.ndarray:
    frames = clean[: len(clean) // FRAME * FRAME].reshape(-1, FRAME).astype(np.float64)
    rms = np.sqrt((frames**2).mean(axis=1))
    return rms > 0.05 * rms.max()


def main() -> None:
    clips = []
    for case in cases(20):
        utt = speak(case.text, case.voice, speed=case.speed)
        pad = np.zeros(16000, np.int16)
        clips.append(np.concatenate([pad, utt, pad]))
    for noise in (0, 300, 1000):
        for engine, threshold in (("silero", 0.78), ("silero", 0.5), ("webrtcvad", 0.78)):
            tp = fp = fn = tn = 0
            for k, clean in enumerate(clips):
                truth = labels(clean)
                mixed = np.clip(clean.astype(np.int32) + (pink_noise(len(clean), noise, k) if noise else 0),
                                -32768, 32767).astype(np.int16)
                scorer = make_scorer(engine)
                pred = np.array([scorer.score(mixed[i * FRAME:(i + 1) * FRAME]) >= threshold
                                 for i in range(len(truth))])
                tp += int(np.sum(pred & truth))
                fp += int(np.sum(pred & ~truth))
                fn += int(np.sum(~pred & truth))
                tn += int(np.sum(~pred & ~truth))
            acc = (tp + tn) / (tp + tn + fp + fn)
            f1 = 2 * tp / max(1, 2 * tp + fp + fn)
            print(f"noise rms {noise:5d}  {engine:9s} thr {threshold:.2f}: accuracy {acc:.3f}  F1 {f1:.3f}  "
                  f"false speech {fp / max(1, fp + tn):.3f}")


if __name__ == "__main__":
    main()
