"""``hub-runtime run``: drive a dialogue loop from a WAV file (fast or real time) or live."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

import numpy as np

from .audio.format import AudioFormatError, Int16Array, read_wav, write_wav
from .errors import CliError
from .loop import DialogueLoop, EchoRoom, Engines, parse_echo
from .pipeline import Clock
from .settings import Settings

_LOGGER = logging.getLogger(__name__)

TAIL_MAX_S: Final = 30.0  # after the input ends, wait at most this for the hub to finish
TAIL_QUIET_S: Final = 0.3  # and add this much silence at the end


@dataclass
class RunResult:
    """What a file run produced."""

    events: list[dict[str, Any]] = field(default_factory=list)
    speaker: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    mic: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    cpu_s: float = 0.0  # process CPU (all threads) while frames were fed, set-up excluded


class EventLog:
    """Collects events and writes them as JSON lines."""

    def __init__(self, stream: TextIO | None = None,
                 listener: Callable[[dict[str, Any]], None] | None = None) -> None:
        """Write to ``stream`` (if any) and call ``listener`` per event."""
        self.events: list[dict[str, Any]] = []
        self._stream = stream
        self.listeners: list[Callable[[dict[str, Any]], None]] = [listener] if listener else []

    def __call__(self, event: dict[str, Any]) -> None:
        """Record one event."""
        self.events.append(event)
        if self._stream is not None:
            self._stream.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
            self._stream.flush()
        for listener in self.listeners:
            listener(event)


async def run_file(settings: Settings, mic: Int16Array, *, engines: Engines | None = None,
                   realtime: bool = False, echo: tuple[int, float] | None = None,
                   events: EventLog | None = None,
                   say_at: list[tuple[int, str]] | None = None, mqtt: bool = False,
                   linger_s: float = 0.0) -> RunResult:
    """Feed ``mic`` through one loop; the speaker output is on the same timeline.

    ``say_at`` schedules hub utterances (input ms, text), as the MQTT ``say`` topic would.
    With ``mqtt`` the loop is bridged to the broker; ``linger_s`` keeps it running (on
    silence) that long after the input, e.g. for a result from Home Assistant.
    """
    engines = engines or await Engines.load(settings)
    log = events or EventLog()
    clock = Clock(realtime=realtime)
    loop = DialogueLoop(settings, engines, clock=clock, events=log)
    await loop.start()
    bridge = None
    if mqtt:
        from .mqtt.bridge import start_bridge

        try:
            bridge = await start_bridge(settings, loop, engines.agent)
        except Exception:
            await loop.stop()
            raise
        if bridge is not None:
            log.listeners.append(bridge.on_event)
            assert bridge.link is not None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5.0):  # start listening before speech comes in
                    await bridge.link.ready.wait()
    n = settings.audio.chunk_size
    frame_ms = settings.frame_ms
    room = EchoRoom(echo[0], echo[1], n) if echo else None
    total = math.ceil(len(mic) / n)
    speaker: list[Int16Array] = []
    heard: list[Int16Array] = []
    tail_max = int((TAIL_MAX_S + linger_s) * 1000 / frame_ms)
    quiet_needed = int((TAIL_QUIET_S + linger_s) * 1000 / frame_ms)
    clock.start()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    i, quiet = 0, 0
    scripted = sorted(say_at or [])
    try:
        while i < total + tail_max:
            frame = mic[i * n : (i + 1) * n]
            if len(frame) < n:
                frame = np.concatenate([frame, np.zeros(n - len(frame), np.int16)])
            clock.position_ms = i * frame_ms
            while scripted and scripted[0][0] <= clock.position_ms:
                loop.say(scripted.pop(0)[1])
            out, frame = loop.tick(frame, clock.position_ms, room)
            speaker.append(out)
            heard.append(frame)
            i += 1
            if realtime:
                delay = t0 + i * frame_ms / 1000 - time.perf_counter()
                await asyncio.sleep(max(0.0, delay))
            else:
                await loop.pipeline.wait_idle()
            if i >= total and not scripted:
                quiet = 0 if loop.busy else quiet + 1
                if quiet >= quiet_needed:
                    break
    finally:
        cpu = time.process_time() - cpu0
        if bridge is not None:
            await bridge.stop()
        await loop.stop()
    return RunResult(cpu_s=cpu, events=log.events, speaker=np.concatenate(speaker) if speaker else
                     np.zeros(0, np.int16), mic=np.concatenate(heard) if heard else
                     np.zeros(0, np.int16))


async def run_live(settings: Settings, events: EventLog, *, mqtt: bool = True) -> None:
    """Run on the configured sound devices until interrupted."""
    from .audio.devices import LiveDuplex
    from .mqtt.bridge import start_bridge

    device = LiveDuplex(settings)  # fails first (DeviceError) when there is no device
    engines = await Engines.load(settings)
    clock = Clock(realtime=True)
    loop = DialogueLoop(settings, engines, clock=clock, events=events)
    await loop.start()
    bridge = None
    try:
        if mqtt:
            bridge = await start_bridge(settings, loop, engines.agent)
            if bridge is not None:
                events.listeners.append(bridge.on_event)
        clock.start()
        async for frame in device.frames():
            out, _heard = loop.tick(frame, clock.now_ms())
            device.play(out)
    finally:
        device.close()
        if bridge is not None:
            await bridge.stop()
        await loop.stop()


def run_command(settings: Settings, args: argparse.Namespace) -> int:
    """The ``run`` sub-command."""
    try:
        echo = parse_echo(args.echo)
    except ValueError as err:
        raise CliError(str(err)) from None
    stream = open(args.events, "w", encoding="utf-8") if args.events else None
    try:
        log = EventLog(stream)
        if args.input is None:
            from .audio.devices import DeviceError
            from .mqtt.broker import BrokerError

            try:
                asyncio.run(run_live(settings, log, mqtt=args.mqtt is not False))
            except (DeviceError, BrokerError) as err:
                raise CliError(str(err)) from None
            return 0
        try:
            mic = read_wav(args.input)
        except AudioFormatError as err:
            raise CliError(str(err)) from None
        from .mqtt.broker import BrokerError

        mqtt = bool(args.mqtt) and settings.mqtt.enabled
        try:
            result = asyncio.run(run_file(settings, mic, realtime=args.realtime or mqtt, echo=echo,
                                          events=log, mqtt=mqtt, linger_s=args.linger))
        except BrokerError as err:
            raise CliError(str(err)) from None
        if args.output:
            write_wav(Path(args.output), result.speaker)
    finally:
        if stream is not None:
            stream.close()
    return 0
