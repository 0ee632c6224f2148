"""``hub-runtime run``: a dialogue loop on a WAV file (fast or real time) or on the live devices."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import numpy as np

from . import memory
from .agent import Agent
from .arbitration import Arbiter
from .audio.devices import DeviceError
from .audio.format import AudioFormatError, Int16Array, read_wav, write_wav
from .audio.synthetic import EchoRoom, parse_echo
from .driver import drive
from .engines import Engines
from .errors import CliError
from .events import EventLog
from .health import Health
from .http import HttpServer
from .loop import DialogueLoop
from .metrics import Metrics
from .pipeline import Clock
from .rooms import Rooms
from .settings import Settings

if TYPE_CHECKING:
    from .gpio import Gpio
    from .mqtt.bridge import MqttBridge

_LOGGER = logging.getLogger(__name__)

TAIL_MAX_S: Final = 30.0  # after the input ends, wait at most this for the hub to finish
TAIL_QUIET_S: Final = 0.3  # and add this much silence at the end
READY_TIMEOUT_S: Final = 5.0  # the MQTT link's subscriptions, before speech comes in
REOPEN_FIRST_S: Final = 1.0  # a lost audio device: first retry after this, doubling
REOPEN_MAX_S: Final = 30.0  # ... up to this


@dataclass
class RunResult:
    """What a file run produced."""

    events: list[dict[str, Any]] = field(default_factory=list)
    speaker: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    mic: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    cpu_s: float = 0.0  # process CPU (all threads) while frames were fed, set-up excluded
    cpu_threads: dict[str, float] = field(default_factory=dict)  # ... by thread (``driver.Recording``)


@contextlib.asynccontextmanager
async def running_loop(settings: Settings, log: EventLog, *, realtime: bool, mqtt: bool,
                       engines: Engines | None = None, agent: Agent | None = None,
                       http: bool = False) -> AsyncIterator[DialogueLoop]:
    """A started loop (bridged to MQTT with ``mqtt``, served over HTTP with ``http``).

    On exit it is stopped, and engines loaded here are closed. With ``http`` the loop's
    :attr:`~DialogueLoop.server` is the running :class:`~.http.HttpServer`.
    """
    owned = engines is None
    shared = engines or await Engines.load(settings)
    home = agent if agent is not None else await asyncio.to_thread(Agent.from_settings, settings)
    # live, satellites may join (websocket, Hermes audio): the hub's own room competes with them
    arbiter = Arbiter() if realtime and (http or mqtt) else None
    rooms = Rooms(settings, shared, home, arbiter=arbiter) if arbiter is not None else None
    loop = DialogueLoop(settings, shared, home, clock=Clock(realtime=realtime), events=log, arbiter=arbiter)
    bridge = None
    ops: Operations | None = None
    pins: Gpio | None = None
    try:
        await loop.start()
        if http:
            ops = await Operations.start(settings, loop, log, shared, rooms)
        if mqtt:
            from .mqtt.bridge import start_bridge

            bridge = await start_bridge(settings, loop, rooms)
            if bridge is not None:
                log.listeners.append(bridge.on_event)
                if ops is not None:
                    ops.watch_mqtt(bridge)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(READY_TIMEOUT_S):  # listen before speech comes in
                        await bridge.ready()
        if settings.gpio.enabled:
            from .gpio import Gpio

            told = bridge
            pins = Gpio(settings.gpio, loop, on_mute=lambda _muted: told.publish_status() if told else None)
            log.listeners.append(pins.on_event)
        yield loop
    finally:
        if pins is not None:
            pins.close()
        if ops is not None:
            await ops.stop()
        if bridge is not None:
            await bridge.stop()
        if rooms is not None:
            await rooms.close()
        await loop.stop()
        if owned:
            await shared.close()


@dataclass
class Operations:
    """What the owner of a running hub sees: metrics, health (and systemd's watchdog), the web server."""

    metrics: Metrics
    health: Health
    server: HttpServer
    rooms: Rooms | None  # satellites' rooms (``/satellite/{site}``)

    @classmethod
    async def start(cls, settings: Settings, loop: DialogueLoop, log: EventLog, engines: Engines,
                    rooms: Rooms | None) -> Operations:
        """Measure the loop from its events and ticks, watch its health, serve both (and satellites' rooms)."""
        metrics = Metrics()

        def degraded() -> list[str]:  # a fallback in use (the hub works, worse)
            why = getattr(engines.synth, "degraded", None)
            return [why] if why else []

        metrics.degraded.labels("voice").set_function(lambda: 1.0 if degraded() else 0.0)
        health = Health(stall_ms=settings.http.stall_ms, metrics=metrics, watchdog=settings.http.watchdog,
                        degraded=degraded, max_cpu_percent=settings.http.max_cpu_percent,
                        max_memory_mb=settings.http.max_memory_mb)
        loop.understanding.overloaded = health.overloaded
        log.listeners += [metrics.on_event, health.on_event]
        loop.on_tick.append(health.ticked)
        server = HttpServer(settings.http, loop, metrics, health, rooms=rooms)
        await server.start()  # a taken port fails the start, loudly
        loop.server = server
        health.start()
        return cls(metrics, health, server, rooms)

    def watch_mqtt(self, bridge: MqttBridge) -> None:
        """Report the MQTT link's state as a metric."""
        self.metrics.mqtt_connected.set_function(
            lambda: 1.0 if bridge.link is not None and bridge.link.connected.is_set() else 0.0)

    async def stop(self) -> None:
        """Stop the monitor, the server, the satellites' rooms."""
        await self.health.stop()
        await self.server.stop()


async def run_file(settings: Settings, mic: Int16Array, *, engines: Engines | None = None,
                   agent: Agent | None = None, realtime: bool = False, echo: tuple[int, float] | None = None,
                   events: EventLog | None = None, say_at: list[tuple[int, str]] | None = None,
                   mqtt: bool = False, linger_s: float = 0.0, http: bool = False) -> RunResult:
    """Feed ``mic`` through one loop; the speaker output is on the same timeline.

    ``say_at`` schedules hub utterances (input ms, text), as the MQTT ``say`` topic would.
    With ``mqtt`` the loop is bridged to the broker, with ``http`` served (``http.py``);
    ``linger_s`` keeps it running (on silence) that long after the input, e.g. for a
    result from Home Assistant.
    """
    log = events or EventLog()
    async with running_loop(settings, log, realtime=realtime, mqtt=mqtt, engines=engines, agent=agent,
                            http=http) as loop:
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

        # at real speed the file stands in for the live devices: the memory is kept as run_live keeps it
        with memory.long_lived() if realtime else contextlib.nullcontext():
            recording = await drive(loop, source, realtime=realtime,
                                    room=EchoRoom(echo[0], echo[1], n) if echo else None)
    return RunResult(events=log.events, speaker=recording.speaker_audio, mic=recording.mic_audio,
                     cpu_s=recording.cpu_s, cpu_threads=recording.cpu_threads)


class Device(Protocol):
    """A duplex audio device: microphone frames in, speaker frames out."""

    def frames(self) -> AsyncIterator[Int16Array]:
        """Microphone frames as they arrive."""
        ...

    def play(self, frame: Int16Array) -> None:
        """The next speaker frame."""

    def close(self) -> None:
        """Release the device."""


async def live_frames(open_device: Callable[[], Device], *, stall_s: float,
                      on_device: Callable[[Device], None]) -> AsyncGenerator[Int16Array]:
    """Frames from the device; one that stops (unplugged, a dead stream) is reopened with back-off.

    The first open's DeviceError propagates (no device at all is a set-up error); later
    ones are retried, 1 s, 2 s, 4 s ... up to ``REOPEN_MAX_S``, with one log line each way.
    """
    device: Device | None = open_device()
    delay = REOPEN_FIRST_S
    while True:
        if device is None:
            await asyncio.sleep(delay)
            try:
                device = open_device()
            except DeviceError as err:
                delay = min(REOPEN_MAX_S, delay * 2)
                _LOGGER.debug("the audio device is still away: %s", err)
                continue
            _LOGGER.warning("the audio device is back")
            delay = REOPEN_FIRST_S
        on_device(device)
        frames = device.frames()
        try:
            while True:
                async with asyncio.timeout(stall_s):
                    frame = await anext(frames)
                yield frame
        except (TimeoutError, StopAsyncIteration, DeviceError) as err:
            _LOGGER.warning("the audio device stopped (%s); reopening it", type(err).__name__)
        finally:
            if isinstance(frames, AsyncGenerator):
                await frames.aclose()
            device.close()
        device = None


async def run_live(settings: Settings, events: EventLog, *, mqtt: bool = True, http: bool | None = None,
                   open_device: Callable[[], Device] | None = None, stop: asyncio.Event | None = None) -> None:
    """Run on the configured sound devices until interrupted (or ``stop`` is set)."""
    if open_device is None:
        from .audio.devices import LiveDuplex

        def open_device() -> Device:
            return LiveDuplex(settings)

    current: list[Device] = []  # the device open now

    def opened(device: Device) -> None:
        current[:] = [device]

    frames = live_frames(open_device, stall_s=max(1.0, settings.http.stall_ms / 1000), on_device=opened)
    first = await anext(frames)  # a missing device fails here, before anything is loaded
    async with running_loop(settings, events, realtime=True, mqtt=mqtt,
                            http=settings.http.enabled if http is None else http) as loop:
        with memory.long_lived():  # what the start built lives as long as the hub
            loop.clock.start()
            frame: Int16Array | None = first
            while frame is not None and not (stop is not None and stop.is_set()):
                out, _heard = loop.tick(frame, loop.clock.now_ms())
                current[0].play(out)
                frame = await anext(frames, None)
    await frames.aclose()


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
            try:
                asyncio.run(run_live(settings, EventLog(stream, keep=False), mqtt=args.mqtt is not False,
                                     http=args.http))
            except (DeviceError, BrokerError) as err:
                raise CliError(str(err)) from None
            return 0
        try:
            mic = read_wav(args.input)
        except AudioFormatError as err:
            raise CliError(str(err)) from None
        mqtt = bool(args.mqtt) and settings.mqtt.enabled
        try:
            result = asyncio.run(run_file(settings, mic, realtime=args.realtime or mqtt or bool(args.http),
                                          echo=echo, events=log, mqtt=mqtt, linger_s=args.linger,
                                          http=bool(args.http)))
        except BrokerError as err:
            raise CliError(str(err)) from None
        if args.output:
            write_wav(Path(args.output), result.speaker)
    finally:
        if stream is not None:
            stream.close()
    return 0
