"""The voice loop in real time (``--realtime`` semantics) on this machine.

For in-grammar commands in varied synthetic voices: end of speech → intent and →
first hub audio (p50/p95), accuracy (intent and targets exact), CPU per second of
audio; for barge-in: user onset while the hub speaks → playback paused (p50/p95),
real utterances cancelled; backchannels resumed, not cancelled.
Usage: .venv/bin/python bench/voice_loop.py [N_COMMANDS] [--runs 3] (the issue reports medians over 3 runs)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from commands import cases

from hub_runtime.agent import Agent
from hub_runtime.audio.synthetic import reverb, scene, speak, speech_bounds_ms
from hub_runtime.driver import NATIVE
from hub_runtime.engines import Engines
from hub_runtime.runner import run_file
from hub_runtime.settings import Settings

LONG = ("Here is the weather for the whole week. Monday will be sunny and warm. "
        "Tuesday brings clouds in the morning and light rain in the afternoon.")
INTERRUPTIONS = [("turn off the office fan", "en-us", 1.0), ("open the garage door", "piper", 1.0),
                 ("stop talking and turn on the kitchen light", "en-gb", 1.0),
                 ("what time is it", "piper", 1.2), ("close the bedroom blinds", "en-us+m3", 1.0)]
BACKCHANNELS = [("okay", "en-us", 1.3), ("yeah", "piper", 1.0), ("mm", "piper", 1.0),
                ("uh huh", "en-us", 1.3), ("right", "piper", 1.1)]


# (stage, from event, to event) on the loop's clock; "true end" is where the words end
BUDGET = [
    ("VAD: true end -> speech_end (its own estimate)", "true end", "speech_end"),
    ("turn: true end -> end of turn", "true end", "end_of_turn"),
    ("ASR: end of turn -> final transcript", "end_of_turn", "transcript"),
    ("NLU: transcript -> intent", "transcript", "intent"),
    ("reply: intent -> response (act, render)", "intent", "response"),
    ("TTS + output: response -> first hub audio", "response", "tts_start"),
    ("total: true end -> intent", "true end", "intent"),
    ("total: true end -> first hub audio", "true end", "tts_start"),
]


# who used the CPU (``RunResult.cpu_threads``): each thread's name, by its prefix, to what it runs
CPU_BUDGET = [
    ("MainThread", "the loop: frames through AEC, VAD, pocketsphinx, the stages"),
    ("asyncio_", "worker threads: Whisper's search and scoring, the NLU's choice, Piper"),
    ("whisper-beside", "Whisper's own words scored beside the search"),
    ("voice-ahead", "replies made ahead while idle (Piper)"),
    (NATIVE, "native pools: CTranslate2 (Whisper's encoder, free decode), onnxruntime"),
]


def cpu_part(thread: str) -> str:
    """The line of ``CPU_BUDGET`` a thread's CPU goes to ("other threads" for none)."""
    return next((what for prefix, what in CPU_BUDGET if thread.startswith(prefix)), "other threads")


def pct(xs: list[float], q: float) -> str:
    return f"{np.percentile(xs, q):.0f}" if xs else "-"


STAGES = ["speech_end", "end_of_turn", "transcript", "intent", "response", "tts_start"]


async def commands(settings: Settings, shared: Engines, n: int | None) -> dict[str, object]:
    """One pass over the spoken commands: accuracy, latencies, CPU and every turn's budget."""
    truth = Agent.from_settings(settings)
    lat_intent, lat_audio, ok, total, cpu, audio_s = [], [], 0, 0, 0.0, 0.0
    budget: dict[str, list[int]] = {name: [] for name, _a, _b in BUDGET}
    cpu_parts: dict[str, float] = {}
    print(f"  {'command':42s} {'voice':13s} " + " ".join(f"{s[:10]:>10s}" for s in STAGES) + "  tier")
    for case in cases(n):
        utt = speak(case.text, case.voice, speed=case.speed)
        if case.reverb:
            utt = reverb(utt)
        mic = scene([(500, utt)], 500 + len(utt) // 16 + 1500, noise_rms=case.noise_rms)
        end = 500 + speech_bounds_ms(utt)[1]
        want = truth.recognize(case.text)
        res = await run_file(settings, mic, engines=shared, agent=Agent.from_settings(settings), realtime=True)
        cpu += res.cpu_s
        for thread, used in res.cpu_threads.items():
            part = cpu_part(thread)
            cpu_parts[part] = cpu_parts.get(part, 0.0) + used
        audio_s += len(res.mic) / 16000
        got = [e for e in res.events if e["type"] == "intent"]
        total += 1
        right = bool(want and got and got[0]["name"] == want.name and got[0]["targets"] == want.targets)
        ok += right
        if got:
            lat_intent.append(got[0]["t_ms"] - end)
        first = [e for e in res.events if e["type"] == "tts_start"]
        if first:
            lat_audio.append(first[0]["t_ms"] - end)
        times = {"true end": end}
        for e in res.events:
            times.setdefault(e["type"], e["t_ms"])
        for name, a, b in BUDGET:
            if a in times and b in times:
                budget[name].append(times[b] - times[a])
        tiers = [e.get("tier") for e in res.events if e["type"] == "transcript"]
        # each stage's time after the true end of the words, on the loop's clock
        row = " ".join(f"{times[s] - end:>10d}" if s in times else f"{'-':>10s}" for s in STAGES)
        print(f"  {case.text[:42]:42s} {case.voice + ' x' + str(case.speed):13s} {row}  {','.join(map(str, tiers))}"
              + ("" if right else f"  MISS heard {[e.get('text') for e in res.events if e['type'] == 'transcript']}"))
    return {"ok": ok, "total": total, "intent": lat_intent, "audio": lat_audio, "cpu": cpu / audio_s,
            "budget": budget, "cpu_parts": {part: used / audio_s for part, used in cpu_parts.items()}}


async def overlaps(settings: Settings, shared: Engines) -> dict[str, object]:
    """Talking over the hub's long answer: how fast it pauses, what is cancelled, what resumes."""
    pause, cancelled = [], 0
    for text, voice, speed in INTERRUPTIONS:
        utt = speak(text, voice, speed=speed)
        mic = scene([(2000, utt)], 2000 + len(utt) // 16 + 2500)
        onset = 2000 + speech_bounds_ms(utt)[0]
        res = await run_file(settings, mic, engines=shared, agent=Agent.from_settings(settings), realtime=True,
                             say_at=[(0, LONG)])
        b = [e for e in res.events if e["type"] == "barge_in"]
        if b:
            pause.append(b[0]["t_ms"] - onset)
        cancelled += any(e["type"] == "tts_cancelled" for e in res.events)

    resumed, bc_cancelled = 0, 0
    for text, voice, speed in BACKCHANNELS:
        utt = speak(text, voice, speed=speed)
        mic = scene([(2500, utt)], 12000)
        res = await run_file(settings, mic, engines=shared, agent=Agent.from_settings(settings), realtime=True,
                             say_at=[(0, LONG)])
        kinds = [e["type"] for e in res.events]
        resumed += "tts_resumed" in kinds and "tts_cancelled" not in kinds
        bc_cancelled += "tts_cancelled" in kinds
    return {"pause": pause, "cancelled": cancelled, "resumed": resumed, "bc_cancelled": bc_cancelled}


def report(c: dict[str, Any], o: dict[str, Any]) -> dict[str, float]:
    """Print one run's figures; return the headline ones."""
    ok, total, pause = c["ok"], c["total"], o["pause"]
    print(f"commands: {total}; accuracy (intent and targets exact) {ok}/{total} = {ok / max(1, total):.1%}")
    print(f"end of speech -> intent: p50 {pct(c['intent'], 50)} ms, p95 {pct(c['intent'], 95)} ms")
    print(f"end of speech -> first hub audio: p50 {pct(c['audio'], 50)} ms, p95 {pct(c['audio'], 95)} ms")
    print(f"barge-in onset -> playback paused: p50 {pct(pause, 50)} ms, p95 {pct(pause, 95)} ms "
          f"({len(pause)}/{len(INTERRUPTIONS)} paused, {o['cancelled']} cancelled for good)")
    print(f"backchannels: {o['resumed']}/{len(BACKCHANNELS)} resumed, {o['bc_cancelled']} cancelled")
    print(f"CPU: {c['cpu']:.3f} s per s of audio (whole loop, one stream, commands with 2 s of silence)")
    out = {"accuracy": ok / max(1, total), "cpu": c["cpu"]}
    print("CPU budget (s per s of audio, by thread):")
    parts = {what: 0.0 for _prefix, what in CPU_BUDGET} | c["cpu_parts"]  # a part idle in this run: 0
    for part, used in sorted(parts.items(), key=lambda item: -item[1]):
        print(f"  {part:75s} {used:.3f}")
        out["CPU: " + part.split(":")[0]] = used
    print("latency budget per turn (ms; p50 / p95):")
    for name, _a, _b in BUDGET:
        xs = c["budget"][name]
        print(f"  {name:42s} {pct(xs, 50):>5} / {pct(xs, 95):>5}  ({len(xs)} turns)")
        if xs:
            out[name + " p50"], out[name + " p95"] = float(np.percentile(xs, 50)), float(np.percentile(xs, 95))
    if pause:
        out["onset -> paused p50"], out["onset -> paused p95"] = float(np.percentile(pause, 50)), float(
            np.percentile(pause, 95))
    return out


def _kept(engines: Engines) -> tuple[int, int]:
    """The replies the voice played from what it kept, and those it made (``CachedSynth``)."""
    return getattr(engines.synth, "hits", 0), getattr(engines.synth, "misses", 0)


async def main(n: int | None, runs: int) -> None:
    settings = Settings()
    shared = await Engines.load(settings, llm=False)
    figures: list[dict[str, float]] = []
    try:
        for run in range(runs):
            print(f"run {run + 1}/{runs}: each turn's events, ms after the true end of the words")
            before = _kept(shared)
            figures.append(report(await commands(settings, shared, n), await overlaps(settings, shared)))
            hits, misses = (a - b for a, b in zip(_kept(shared), before, strict=True))
            print(f"replies the voice had kept (said before, in this run or an earlier one): {hits}/{hits + misses}")
    finally:
        await shared.close()
    if runs > 1:
        print(f"medians over {runs} runs:")
        for key in figures[0]:
            values = [f[key] for f in figures if key in f]
            print(f"  {key:52s} {np.median(values):8.3f}  (runs: {', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=None, help="commands per run (default: all 30)")
    parser.add_argument("--runs", type=int, default=1, help="repeat, and print each figure's median over the runs")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.runs))
