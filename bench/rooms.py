"""Rooms: how many concurrent rooms one core serves in real time, and how well the loudest room is chosen.

1. Capacity (the grammar tier alone: ``asr.second_tier: none``, no LLM, espeak replies),
   with each VAD (Silero, webrtcvad): N rooms share one process's engines; each hears a
   spoken command every few seconds. The rooms are made first (each loads its recogniser:
   set-up, not counted); then all are fed in lockstep as fast as they go, and the process
   CPU per second of audio per room gives the rooms one core serves in real time
   (1 / CPU per room-second). A cProfile of the largest run shows where the time goes.
2. Arbitration: the same utterance in two rooms at two levels (the far room 6, 12 and
   18 dB quieter and 20-60 ms later); the right room must answer, once.
Usage: .venv/bin/python bench/rooms.py [N_ROOMS ...]   (default 1 4 8)
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
import sys
import time
from dataclasses import replace

import numpy as np

from hub_runtime.agent import Agent
from hub_runtime.arbitration import Arbiter
from hub_runtime.audio.format import RATE
from hub_runtime.audio.synthetic import speak
from hub_runtime.engines import Engines
from hub_runtime.rooms import Rooms, run_rooms
from hub_runtime.settings import AsrSettings, LlmSettings, Settings, TtsSettings

COMMANDS = [("turn on the kitchen light", "piper"), ("what time is it", "en-us"),
            ("turn off the kitchen light", "en-gb"), ("open the garage door", "en-us+f3"),
            ("close the garage door", "piper"), ("set the bedroom light to 40 percent", "en-us+m3")]
GRAMMAR_ONLY = Settings(asr=AsrSettings(second_tier="none"), llm=LlmSettings(enabled=False),
                        tts=TtsSettings(engine="espeak"))
WEBRTC = replace(GRAMMAR_ONLY, audio=replace(GRAMMAR_ONLY.audio, vad_engine="webrtcvad", vad_threshold=0.5))


def track(offset: int, seconds: float) -> np.ndarray:
    """A room's microphone: commands with pauses (each room starts at another command)."""
    parts, total = [], 0
    i = offset
    while total < seconds * RATE:
        text, voice = COMMANDS[i % len(COMMANDS)]
        part = np.concatenate([np.zeros(RATE, np.int16), speak(text, voice), np.zeros(2 * RATE, np.int16)])
        parts.append(part)
        total += len(part)
        i += 1
    return np.concatenate(parts)[: int(seconds * RATE)]


async def capacity(settings: Settings, n: int, engines: Engines, seconds: float, profile: bool) -> float:
    rooms = Rooms(settings, engines, Agent.from_settings(settings), realtime=False)
    mics = {f"room{i}": track(i, seconds) for i in range(n)}
    for site in mics:
        await rooms.room(site)  # set-up (the recogniser's grammar): not counted
    profiler = cProfile.Profile() if profile else None
    cpu0 = time.process_time()
    if profiler:
        profiler.enable()
    await run_rooms(rooms, mics, tail_ms=500)
    if profiler:
        profiler.disable()
    cpu = time.process_time() - cpu0
    await rooms.close()
    per_room = cpu / (seconds * n)
    print(f"{settings.audio.vad_engine:>9} {n:>3} rooms: CPU {per_room:.3f} s per room-second of audio "
          f"-> {1 / per_room:.1f} rooms per core")
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(12)
        print("   where the time goes (tottime, top 12):")
        for line in out.getvalue().splitlines():
            if line.strip() and ("{" in line or "/" in line) and not line.lstrip().startswith("ncalls"):
                print("   " + line.strip()[:150])
    return per_room


async def arbitration(engines: Engines) -> None:
    settings = replace(Settings(llm=LlmSettings(enabled=False)))
    cases = [(text, voice, db, delay) for (text, voice) in COMMANDS[:4] for db in (6, 12, 18)
             for delay in (20, 60)]
    right = 0
    for text, voice, db, delay in cases:
        speech = speak(text, voice)
        near = np.concatenate([np.zeros(RATE // 2, np.int16), speech, np.zeros(RATE, np.int16)])
        far = np.concatenate([np.zeros(RATE // 2 + delay * RATE // 1000, np.int16),
                              (speech * 10 ** (-db / 20)).astype(np.int16), np.zeros(RATE, np.int16)])
        rooms = Rooms(settings, engines, Agent.from_settings(settings), realtime=False, arbiter=Arbiter(3000))
        # the near room is listed second: it must win on loudness, not on order
        await run_rooms(rooms, {"far": far, "near": near})
        spoke = {site: any(e["type"] == "tts_start" for e in room.log.events) for site, room in rooms.rooms.items()}
        await rooms.close()
        ok = spoke["near"] and not spoke["far"]
        right += ok
        if not ok:
            print(f"   wrong: {text!r} {voice} far -{db} dB +{delay} ms: answered {spoke}")
    print(f"arbitration: the near room alone answered {right}/{len(cases)}")


async def main(counts: list[int]) -> None:
    engines = await Engines.load(GRAMMAR_ONLY, llm=False)
    for settings in (GRAMMAR_ONLY, WEBRTC):
        for i, n in enumerate(counts):
            await capacity(settings, n, engines, seconds=30.0, profile=i == len(counts) - 1)
    await arbitration(await Engines.load(Settings(), llm=False))


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1, 4, 8]))
