"""The C audio path against its numpy twin: per-function speed-up, and the loop's CPU per second of audio.

Each function runs on one 30 ms frame (480 samples at 16 kHz; the resampler on one 30 ms
block at 48 kHz and at 44.1 kHz; the echo canceller on one frame with a 300 ms tail), timed
in batches; medians of 7 batches. The echo canceller's quality follows, C and twin, in
rooms with a reverberant tail (20-120 ms, gain 0.2-0.8): ERLE where only the hub talks, the
talker's level and SNR where someone talks over it. Then the same
spoken file goes through the loop twice, in child processes, with the C path and with
``DUPLEX_HUB_PURE=1``: process CPU per second of audio (medians of 3 runs each).
Usage: .venv/bin/python bench/native.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hub_runtime.audio import echo_twin, twin
from hub_runtime.audio.synthetic import measure_echo, room_response, speak

BATCH = 2000


def per_call_us(fn: Callable[[], Any], batch: int = BATCH) -> float:
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        runs.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(runs)


def echo_call(impl: Any) -> Callable[[], Any]:
    rng = np.random.default_rng(2)
    aec = impl.EchoCanceller(480, 4800, 16000)
    mic, ref = (rng.integers(-8000, 8000, 480).astype(np.int16) for _ in range(2))
    out = np.empty(480, np.int16)
    return lambda: aec.process(mic, ref, out)


def echo_quality(echo: Any) -> None:
    answer = speak("It is twenty one degrees in the living room and the kitchen light is on. "
                   "I can set timers and play music.", "en-us+f3")
    far, near = np.concatenate([answer, answer]), speak("stop, turn off the kitchen light", "en-us")
    print(f"{'echo room (delay, gain)':<24} {'impl':>5} {'ERLE dB':>8} {'talker dB':>10} "
          f"{'SNR in':>7} {'SNR out':>8}")
    for delay, gain in [(20, 0.2), (60, 0.5), (120, 0.8)]:
        for name, impl in (("c", echo), ("numpy", echo_twin)):
            r = measure_echo(impl.EchoCanceller(480, 4800, 16000), far, near, room_response(delay, gain, seed=3))
            print(f"{delay:>4} ms x{gain:<17} {name:>5} {r.erle_db:>8.1f} {r.near_level_db:>10.1f} "
                  f"{r.near_snr_in_db:>7.1f} {r.near_snr_out_db:>8.1f}")


def functions(impl: Any) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(1)
    frame = rng.integers(-20000, 20000, 480).astype(np.int16)
    as_float = np.empty(480, np.float32)
    back = np.empty(480, np.int16)
    block48 = rng.integers(-20000, 20000, 1440).astype(np.int16)
    block44 = rng.integers(-20000, 20000, 1323).astype(np.int16)
    r48, r44 = impl.Resampler(48000, 16000), impl.Resampler(44100, 16000)
    out = np.empty(2000, np.int16)
    ring = impl.RingBuffer(8192)
    impl.int16_to_float(frame, as_float)

    def ring_trip() -> None:
        ring.write(frame)
        ring.read_into(back)

    return {
        "frame_rms (480)": lambda: impl.frame_rms(frame),
        "int16_to_float (480)": lambda: impl.int16_to_float(frame, as_float),
        "float_to_int16 (480)": lambda: impl.float_to_int16(as_float, back),
        "resample 48k->16k (1440)": lambda: r48.process(block48, out),
        "resample 44.1k->16k (1323)": lambda: r44.process(block44, out),
        "ring write+read (480)": ring_trip,
    }


LOOP_CHILD = """
import asyncio, sys, time
import numpy as np
from hub_runtime.audio import native
from hub_runtime.audio.synthetic import speak
from hub_runtime.engines import Engines
from hub_runtime.agent import Agent
from hub_runtime.runner import run_file
from hub_runtime.settings import Settings
async def main():
    s = Settings()
    e = await Engines.load(s, llm=False)
    gap = np.zeros(16000, np.int16)
    mic = np.concatenate([gap, speak("turn on the kitchen light", "piper"), gap,
                          speak("what time is it", "en-us"), gap])
    r = await run_file(s, mic, engines=e, agent=Agent.from_settings(s))
    print(native.IMPLEMENTATION, r.cpu_s / (mic.size / 16000))
asyncio.run(main())
"""


def loop_cpu(pure: bool) -> tuple[str, float]:
    env = {**os.environ, "DUPLEX_HUB_PURE": "1" if pure else "0"}
    values, name = [], ""
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", LOOP_CHILD], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        name, value = out[-2], float(out[-1])
        values.append(value)
    return name, statistics.median(values)


def main() -> None:
    try:
        from hub_runtime import _native  # type: ignore[attr-defined]
    except ImportError:
        print("the C extension is not built: nothing to compare")
        return
    c, py = functions(_native), functions(twin)
    print(f"{'function (samples)':<28} {'C µs':>8} {'numpy µs':>10} {'speed-up':>9}")
    for name in c:
        tc = per_call_us(c[name])
        tp = per_call_us(py[name], batch=BATCH // 20 if "resample" in name else BATCH)
        print(f"{name:<28} {tc:>8.2f} {tp:>10.2f} {tp / tc:>8.0f}x")
    try:
        from hub_runtime import _echo  # type: ignore[attr-defined]
    except ImportError:
        print("the C echo canceller is not built (libspeexdsp-dev): its twin alone")
    else:
        tc, tp = per_call_us(echo_call(_echo), batch=500), per_call_us(echo_call(echo_twin), batch=50)
        print(f"{'echo cancel (480, 300 ms)':<28} {tc:>8.2f} {tp:>10.2f} {tp / tc:>8.0f}x")
        echo_quality(_echo)
    for pure in (False, True):
        name, cpu = loop_cpu(pure)
        print(f"loop CPU per second of audio with the {name} path: {cpu:.3f} s (median of 3)")


if __name__ == "__main__":
    main()
