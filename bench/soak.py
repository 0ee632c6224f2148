"""Soak: one dialogue loop through many turns, as a hub lives for months: does anything grow or drift.

One loop (fast file mode, a live-style event log that keeps nothing) hears the same
round of spoken commands again and again. Per round it prints the process's resident
memory, the turns answered, the wall time the round took (fast mode: the compute), the
median end of speech → first hub audio on the loop's clock (the turn-taking waits), and
the CPU per second of audio. A leak shows as memory rising round after round; a drift
as the wall time rising.
Usage: .venv/bin/python bench/soak.py [ROUNDS]  (default 8 rounds of 12 turns)
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np

from hub_runtime import protocol as p
from hub_runtime.agent import Agent
from hub_runtime.audio.format import RATE
from hub_runtime.audio.synthetic import speak
from hub_runtime.engines import Engines
from hub_runtime.events import EventLog
from hub_runtime.health import process_usage
from hub_runtime.metrics import Metrics
from hub_runtime.runner import run_file
from hub_runtime.settings import Settings

ROUND = [("turn on the kitchen light", "piper"), ("what time is it", "en-us"),
         ("turn off the kitchen light", "en-gb"), ("set the bedroom light to 40 percent", "piper"),
         ("is the garage door open", "en-us+f3"), ("pause the tv", "piper"),
         ("add milk to my shopping list", "en-us"), ("set a timer for 5 minutes", "piper"),
         ("cancel the timer", "en-gb"), ("open the bedroom blinds", "en-us+m3"),
         ("what's the temperature in the office", "piper"), ("close the bedroom blinds", "en-us")]
GAP_S = 3.0  # silence after each command: the reply plays out


def rss_mb() -> float:
    return process_usage()[1]


async def main(rounds: int) -> None:
    settings = Settings()
    engines = await Engines.load(settings, llm=False)
    agent = await asyncio.to_thread(Agent.from_settings, settings)
    parts, gap = [], np.zeros(int(GAP_S * RATE), np.int16)
    for text, voice in ROUND:
        parts += [speak(text, voice), gap]
    one_round = np.concatenate(parts)
    round_ms = len(one_round) * 1000 // RATE
    mic = np.tile(one_round, rounds)
    per_round: dict[int, dict[str, Any]] = defaultdict(lambda: {"lat": [], "answered": 0, "rss": 0.0,
                                                                "wall": [0.0, 0.0]})
    metrics = Metrics()  # the hub's own measure: from the end of speech (end_of_turn - silence)
    counted: set[int] = set()

    def on_event(event: p.Event) -> None:
        metrics.on_event(event)
        r = per_round[event.t_ms // round_ms]
        now = time.perf_counter()
        r["wall"] = [r["wall"][0] or now, now]
        last = metrics.recent[-1] if metrics.recent else None
        if isinstance(event, p.TtsStart) and last is not None and id(last) not in counted \
                and "first_audio" in last.latency_ms:  # (a timer's announcement is no turn)
            counted.add(id(last))
            r["lat"].append(last.latency_ms["first_audio"])
            r["answered"] += 1
            r["rss"] = rss_mb()

    print(f"{rounds} rounds of {len(ROUND)} turns ({round_ms / 1000:.0f} s of audio each); "
          f"start RSS {rss_mb():.0f} MB")
    cpu0, t0 = time.process_time(), time.perf_counter()
    await run_file(settings, mic, engines=engines, agent=agent, events=EventLog(keep=False, listener=on_event))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    print(f"{'round':>5} {'RSS MB':>7} {'answered':>9} {'wall s':>7} {'p50 first audio ms (loop clock)':>32}")
    for i in range(rounds):
        r = per_round[i]
        p50 = np.median(r["lat"]) if r["lat"] else float("nan")
        print(f"{i + 1:>5} {r['rss']:>7.0f} {r['answered']:>5}/{len(ROUND):<3} {r['wall'][1] - r['wall'][0]:>7.1f} "
              f"{p50:>32.0f}")
    rss = [per_round[i]["rss"] for i in range(rounds)]
    walls = [per_round[i]["wall"][1] - per_round[i]["wall"][0] for i in range(rounds)]
    print(f"RSS growth after the first round: {rss[-1] - rss[1]:+.1f} MB from round 2 to {rounds}; "
          f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"wall per round: median of the first half {np.median(walls[: rounds // 2]):.1f} s, "
          f"of the second half {np.median(walls[rounds // 2 :]):.1f} s")
    audio_s = len(mic) / RATE
    print(f"CPU {cpu / audio_s:.2f} s per s of audio; wall {wall:.0f} s for {audio_s:.0f} s of audio (fast mode)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
