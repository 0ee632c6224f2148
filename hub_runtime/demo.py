"""``hub-runtime demo``: a scripted spoken conversation through the real loop, no hardware.

The user's lines are synthesised (espeak-ng and Piper voices) and played into the
loop's microphone in real time; each line waits until the hub has answered the last
one, except the interruption, which starts while the hub is still giving a long answer.
Prints the transcript with per-turn latencies and writes user and hub to one WAV file.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from .agent import Agent
from .audio.format import Int16Array, write_wav
from .audio.synthetic import speak, speech_bounds_ms
from .driver import drive
from .engines import Engines
from .events import EventLog
from .loop import DialogueLoop
from .pipeline import Clock
from .settings import Settings

PAUSE_MS: Final = 700  # user pause after the hub falls silent
INTERRUPT_AFTER_MS: Final = 2500  # into the long answer
MAX_DEMO_MS: Final = 120_000


@dataclass
class Line:
    """One user line of the script."""

    text: str
    voice: str
    speed: float = 1.0
    interrupt: bool = False  # start while the hub is speaking
    audio: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    start_ms: int = -1
    end_ms: int = -1  # where the words end on the timeline


SCRIPT: Final = [
    Line("turn on the kitchen light", "en-us"),
    Line("is the kitchen light on", "piper"),
    Line("set the living room lamp to blue", "en-us+m3"),
    Line("what can you do", "piper", 1.1),
    Line("open the garage door", "en-us", interrupt=True),
    Line("turn off the kitchen light", "piper", 1.2),
    Line("is the kitchen light on", "en-gb"),
]


async def _play(settings: Settings, lines: list[Line], realtime: bool) -> tuple[list[dict[str, Any]], Int16Array]:
    """Play the script through a loop; the events, and user and hub mixed on one track."""
    engines = await Engines.load(settings)
    agent = await asyncio.to_thread(Agent.from_settings, settings)
    log = EventLog()
    loop = DialogueLoop(settings, engines, agent, clock=Clock(realtime=realtime), events=log)
    n, frame_ms = settings.audio.chunk_size, settings.frame_ms
    pending = list(lines)
    current: Line | None = None
    last: Line | None = None
    cursor = quiet_ms = 0

    def source(t: int) -> Int16Array | None:
        nonlocal current, last, cursor, quiet_ms
        hub_quiet = not (loop.replying or current is not None)
        quiet_ms = quiet_ms + frame_ms if hub_quiet else 0
        if t > MAX_DEMO_MS or (not pending and current is None and quiet_ms >= PAUSE_MS
                               and _answered(log.events, last)):
            return None
        if current is None and pending:
            nxt = pending[0]
            speaking_since = _speaking_since(log.events)
            if (nxt.interrupt and speaking_since is not None and t - speaking_since >= INTERRUPT_AFTER_MS) or (
                    not nxt.interrupt and quiet_ms >= PAUSE_MS and _answered(log.events, last)):
                current = last = pending.pop(0)
                current.start_ms, cursor = t, 0
                current.end_ms = t + speech_bounds_ms(current.audio)[1]
        if current is None:
            return np.zeros(n, np.int16)
        frame = current.audio[cursor : cursor + n]
        cursor += n
        if cursor >= len(current.audio):
            current = None
        return np.pad(frame, (0, n - len(frame)))

    try:
        await loop.start()
        recording = await drive(loop, source, realtime=realtime)
    finally:
        await loop.stop()
        await engines.close()
    mix = recording.mic_audio.astype(np.int32) + recording.speaker_audio
    return log.events, np.clip(mix, -32768, 32767).astype(np.int16)


def _answered(events: list[dict[str, Any]], line: Line | None) -> bool:
    if line is None:
        return True
    return any(e["type"] == "response" and e["t_ms"] >= line.start_ms for e in events) or \
        any(e["type"] == "transcript" and e["t_ms"] >= line.start_ms and not e["text"]
            for e in events)


def _speaking_since(events: list[dict[str, Any]]) -> int | None:
    started = None
    for e in events:
        if e["type"] == "tts_start":
            started = e["t_ms"]
        elif e["type"] in ("tts_end", "tts_cancelled"):
            started = None
    return started


def run_demo(settings: Settings, args: argparse.Namespace) -> int:
    """The ``demo`` sub-command."""
    print("Synthesising the user's lines ...", flush=True)
    lines = [Line(x.text, x.voice, x.speed, x.interrupt) for x in SCRIPT]
    for line in lines:
        line.audio = np.concatenate([speak(line.text, line.voice, speed=line.speed),
                                     np.zeros(160, np.int16)])
    print("Loading the models and playing the conversation in real time ...\n", flush=True)
    events, mix = asyncio.run(_play(settings, lines, realtime=not args.fast))
    _report(lines, events)
    out = Path(args.out)
    write_wav(out, mix)
    print(f"\nThe whole conversation (user and hub) is in {out}")
    return 0


def _report(lines: list[Line], events: list[dict[str, Any]]) -> None:
    intents, firsts = [], []
    for k, line in enumerate(lines):
        nxt = lines[k + 1].start_ms if k + 1 < len(lines) else 10**9
        window = [e for e in events if line.start_ms <= e["t_ms"] < nxt]
        who = f"{line.voice}{'' if line.speed == 1.0 else f' x{line.speed}'}"
        print(f"user ({who}): {line.text}")
        heard = next((e for e in window if e["type"] == "transcript"), None)
        intent = next((e for e in window if e["type"] == "intent"), None)
        reply = next((e for e in window if e["type"] == "response"), None)
        first = next((e for e in window if e["type"] == "tts_start" and reply
                      and e["t_ms"] >= reply["t_ms"]), None)
        for e in window:
            if e["type"] == "barge_in":
                print(f"   [barge-in at {e['t_ms']} ms: the hub pauses]")
            elif e["type"] == "tts_cancelled":
                print(f"   [the hub stops its answer at {e['t_ms']} ms]")
        if heard:
            print(f"   heard: {heard['text']!r} ({heard['tier']})")
        if intent:
            lat = intent["t_ms"] - line.end_ms
            intents.append(lat)
            print(f"   intent: {intent['name']} {intent['targets']}  "
                  f"(end of speech -> intent {lat} ms)")
        if reply:
            tail = ""
            if first:
                firsts.append(first["t_ms"] - line.end_ms)
                tail = f"  (end of speech -> first hub audio {first['t_ms'] - line.end_ms} ms)"
            print(f"hub: {reply['text']}{tail}")
        print()
    if intents:
        print(f"median end of speech -> intent {int(np.median(intents))} ms; "
              f"-> first hub audio {int(np.median(firsts)) if firsts else '-'} ms")
