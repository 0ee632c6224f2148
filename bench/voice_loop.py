"""The voice loop in real time (``--realtime`` semantics) on this machine.

For in-grammar commands in varied synthetic voices: end of speech → intent and →
first hub audio (p50/p95), accuracy (intent and targets exact), CPU per second of
audio; for barge-in: user onset while the hub speaks → playback paused (p50/p95),
real utterances cancelled; backchannels resumed, not cancelled.
Usage: .venv/bin/python bench/voice_loop.py [N_COMMANDS]
"""

from __future__ import annotations

import asyncio
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from commands import cases

from hub_runtime.agent import Agent
from hub_runtime.audio.synthetic import reverb, scene, speak, speech_bounds_ms
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


def pct(xs: list[float], q: float) -> str:
    return f"{np.percentile(xs, q):.0f}" if xs else "-"


async def main(n: int | None) -> None:
    settings = Settings()
    shared = await Engines.load(settings, llm=False)
    truth = Agent.from_settings(settings)

    lat_intent, lat_audio, ok, total, cpu, audio_s = [], [], 0, 0, 0.0, 0.0
    budget: dict[str, list[int]] = {name: [] for name, _a, _b in BUDGET}
    for case in cases(n):
        utt = speak(case.text, case.voice, speed=case.speed)
        if case.reverb:
            utt = reverb(utt)
        mic = scene([(500, utt)], 500 + len(utt) // 16 + 1500, noise_rms=case.noise_rms)
        end = 500 + speech_bounds_ms(utt)[1]
        want = truth.recognize(case.text)
        res = await run_file(settings, mic, engines=shared, agent=Agent.from_settings(settings), realtime=True)
        cpu += res.cpu_s
        audio_s += len(res.mic) / 16000
        got = [e for e in res.events if e["type"] == "intent"]
        total += 1
        if want and got and got[0]["name"] == want.name and got[0]["targets"] == want.targets:
            ok += 1
        else:
            heard = [e.get("text") for e in res.events if e["type"] == "transcript"]
            print(f"miss: {case.text!r} ({case.voice} x{case.speed}) heard {heard}")
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

    print(f"commands: {total}; accuracy (intent and targets exact) {ok}/{total} = {ok / max(1, total):.1%}")
    print(f"end of speech -> intent: p50 {pct(lat_intent, 50)} ms, p95 {pct(lat_intent, 95)} ms")
    print(f"end of speech -> first hub audio: p50 {pct(lat_audio, 50)} ms, p95 {pct(lat_audio, 95)} ms")
    print(f"barge-in onset -> playback paused: p50 {pct(pause, 50)} ms, p95 {pct(pause, 95)} ms "
          f"({len(pause)}/{len(INTERRUPTIONS)} paused, {cancelled} cancelled for good)")
    print(f"backchannels: {resumed}/{len(BACKCHANNELS)} resumed, {bc_cancelled} cancelled")
    print(f"CPU: {cpu / audio_s:.3f} s per s of audio (whole loop, one stream, commands with 2 s of silence)")
    print("latency budget per turn (ms; p50 / p95):")
    for name, _a, _b in BUDGET:
        xs = budget[name]
        print(f"  {name:42s} {pct(xs, 50):>5} / {pct(xs, 95):>5}  ({len(xs)} turns)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
