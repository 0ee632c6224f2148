"""``hub-runtime run``: a dialogue loop on a WAV file (fast or real time) or on the live devices."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from .agent import Agent
from .audio.format import AudioFormatError, Int16Array, read_wav, write_wav
from .audio.synthetic import EchoRoom, parse_echo
from .driver import drive
from .engines import Engines
from .errors import CliError
from .events import EventLog
from .loop import DialogueLoop
from .pipeline import Clock
from .settings import Settings

_LOGGER = logging.getLogger(__name__)

TAIL_MAX_S: Final = 30.0  # after the input ends, wait at most this for the hub to finish
TAIL_QUIET_S: Final = 0.3  # and add this much silence at the end
READY_TIMEOUT_S: Final = 5.0  # the MQTT link's subscriptions, before speech comes in


@dataclass
class RunResult:
    """What a file run produced."""

    events: list[dict[str, Any]] = field(default_factory=list)
    speaker: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    mic: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    cpu_s: float = 0.0  # process CPU (all threads) while frames were fed, set-up excluded


@contextlib.asynccontextmanager
async def running_loop(settings: Settings, log: EventLog, *, realtime: bool, mqtt: bool,
                       engines: Engines | None = None, agent: Agent | None = None) -> AsyncIterator[DialogueLoop]:
    """A started loop (bridged to MQTT with ``mqtt``); stopped, and engines loaded here closed, on exit."""
    owned = engines is None
    shared = engines or await Engines.load(settings)
    home = agent if agent is not None else await asyncio.to_thread(Agent.from_settings, settings)
    loop = DialogueLoop(settings, shared, home, clock=Clock(realtime=realtime), events=log)
    bridge = None
    try:
        await loop.start()
        if mqtt:
            from .mqtt.bridge import start_bridge

            bridge = await start_bridge(settings, loop)
            if bridge is not None:
                log.listeners.append(bridge.on_event)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(READY_TIMEOUT_S):  # listen before speech comes in
                        await bridge.ready()
        yield loop
    finally:
        if bridge is not None:
            await bridge.stop()
        await loop.stop()
        if owned:
            await shared.close()


async def run_file(settings: Settings, mic: Int16Array, *, engines: Engines | None = None,
                   agent: Agent | None = None, realtime: bool = False, echo: tuple[int, float] | None = None,
                   events: EventLog | None = None, say_at: list[tuple[int, str]] | None = None,
                   mqtt: bool = False, linger_s: float = 0.0) -> RunResult:
    """Feed ``mic`` through one loop; the speaker output is on the same timeline.

    ``say_at`` schedules hub utterances (input ms, text), as the MQTT ``say`` topic would.
    With ``mqtt`` the loop is bridged to the broker; ``linger_s`` keeps it running (on
    silence) that long after the input, e.g. for a result from Home Assistant.
    """
    log = events or EventLog()
    async with running_loop(settings, log, realtime=realtime, mqtt=mqtt, engines=engines, agent=agent) as loop:
        n, frame_ms = settings.audio.chunk_size, settings.frame_ms
        total = math.ceil(len(mic) / n)
        tail_max = int((TAIL_MAX_S + linger_s) * 1000 / frame_ms)
        quiet_needed = int((TAIL_QUIET_S + linger_s) * 1000 / frame_ms)
        scripted = sorted(say_at or [])
        quiet = 0

        def source(position: int) -> Int16Array | None:
            nonlocal quiet
            i = position // frame_ms
            if i >= total + tail_max:
                return None
            if i >= total and not scripted:
                quiet = 0 if loop.busy else quiet + 1
                if quiet >= quiet_needed:
                    return None
            while scripted and scripted[0][0] <= position:
                loop.say(scripted.pop(0)[1])
            frame = mic[i * n : (i + 1) * n]
            return np.pad(frame, (0, n - len(frame))) if len(frame) < n else frame

        recording = await drive(loop, source, realtime=realtime,
                                room=EchoRoom(echo[0], echo[1], n) if echo else None)
    return RunResult(events=log.events, speaker=recording.speaker_audio, mic=recording.mic_audio,
                     cpu_s=recording.cpu_s)


async def run_live(settings: Settings, events: EventLog, *, mqtt: bool = True) -> None:
    """Run on the configured sound devices until interrupted."""
    from .audio.devices import LiveDuplex

    device = LiveDuplex(settings)  # fails first (DeviceError) when there is no device
    try:
        async with running_loop(settings, events, realtime=True, mqtt=mqtt) as loop:
            loop.clock.start()
            async for frame in device.frames():
                out, _heard = loop.tick(frame, loop.clock.now_ms())
                device.play(out)
    finally:
        device.close()


def run_command(settings: Settings, args: argparse.Namespace) -> int:
    """The ``run`` sub-command."""
    try:
        echo = parse_echo(args.echo)
    except ValueError as err:
        raise CliError(str(err)) from None
    from .mqtt.broker import BrokerError

    stream = open(args.events, "w", encoding="utf-8") if args.events else None
    try:
        log = EventLog(stream)
        if args.input is None:
            from .audio.devices import DeviceError

            try:
                asyncio.run(run_live(settings, log, mqtt=args.mqtt is not False))
            except (DeviceError, BrokerError) as err:
                raise CliError(str(err)) from None
            return 0
        try:
            mic = read_wav(args.input)
        except AudioFormatError as err:
            raise CliError(str(err)) from None
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
