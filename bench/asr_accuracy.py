"""Spoken in-grammar accuracy through the real loop (fast mode): intent and targets exact.

Prints per-case results, the accuracy, which tier decided, and the CPU per second of audio.
Usage: .venv/bin/python bench/asr_accuracy.py [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(__file__))
from commands import cases

from hub_runtime.agent import Agent
from hub_runtime.audio.synthetic import reverb, scene, speak
from hub_runtime.engines import Engines
from hub_runtime.runner import run_file
from hub_runtime.settings import Settings


async def main(n: int | None) -> None:
    settings = Settings()
    shared = await Engines.load(settings, llm=False)
    truth_agent = Agent.from_settings(settings)
    ok, tiers, cpu, audio_s = 0, Counter(), 0.0, 0.0
    for case in cases(n):
        utt = speak(case.text, case.voice, speed=case.speed)
        if case.reverb:
            utt = reverb(utt)
        mic = scene([(500, utt)], 500 + len(utt) // 16 + 1500, noise_rms=case.noise_rms)
        want = truth_agent.recognize(case.text)
        c0 = time.process_time()
        result = await run_file(settings, mic, engines=shared, agent=Agent.from_settings(settings))
        cpu += time.process_time() - c0
        audio_s += len(mic) / 16000
        got = [e for e in result.events if e["type"] == "intent"]
        tr = [e for e in result.events if e["type"] == "transcript"]
        tier = tr[0]["tier"] if tr else "-"
        tiers[tier] += 1
        good = bool(want and got and got[0]["name"] == want.name and got[0]["targets"] == want.targets)
        ok += good
        print(f"{'ok ' if good else 'BAD'} {case.voice:9s} x{case.speed:<4} noise={case.noise_rms:>3.0f} "
              f"rev={int(case.reverb)} tier={tier:8s} conf={tr[0]['confidence'] if tr else '-'!s:6} "
              f"{case.text!r} -> {tr[0]['text'] if tr else None!r}")
        if not good and tr:
            print(f"      grammar={tr[0].get('grammar_text')!r} ({tr[0].get('grammar_confidence')}) "
                  f"whisper={tr[0].get('open_text')!r}")
    total = sum(tiers.values())
    print(f"\naccuracy {ok}/{total} = {ok / max(1, total):.1%}; tiers {dict(tiers)}")
    print(f"CPU (whole loop incl. TTS, fast mode) {cpu / audio_s:.3f} s per s of audio")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
