"""Test helpers for MQTT: a real mosquitto on a free port, a watching client, a hub in real time."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt

from hub_runtime.agent import Agent
from hub_runtime.audio.format import Int16Array
from hub_runtime.engines import Engines
from hub_runtime.events import EventLog
from hub_runtime.frames import TranscriptFrame
from hub_runtime.loop import DialogueLoop
from hub_runtime.mqtt.bridge import MqttBridge
from hub_runtime.pipeline import Clock
from hub_runtime.settings import Settings

from ..mosquitto import Mosquitto, free_port, wait_port

__all__ = ["Mosquitto", "free_port", "wait_port"]


@dataclass
class Message:
    """A message a watcher received."""

    topic: str
    payload: bytes
    retain: bool

    def json(self) -> Any:
        """The payload as JSON."""
        return json.loads(self.payload)


class Watcher:
    """A plain paho client in its own (joined) thread: another device on the network."""

    def __init__(self, port: int, topics: list[str], *, client_id: str | None = None,
                 persistent: bool = False, protocol: int = mqtt.MQTTv311) -> None:
        """Subscribe to ``topics`` at QoS 1."""
        self.messages: queue.Queue[Message] = queue.Queue()
        self.seen: list[Message] = []
        self._pending: list[Message] = []  # received, not yet returned by wait_for
        self.topics = topics
        self._subscribed = threading.Event()
        kwargs: dict[str, Any] = {"client_id": client_id or f"watcher-{free_port()}", "protocol": protocol}
        if protocol != mqtt.MQTTv5:
            kwargs["clean_session"] = not persistent
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, **kwargs)
        self.client.reconnect_delay_set(0.05, 0.2)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *_a: self._subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        if not self._subscribed.wait(10):
            raise TimeoutError("watcher did not subscribe")

    def _on_connect(self, client: mqtt.Client, *_args: Any) -> None:
        for topic in self.topics:
            client.subscribe(topic, qos=1)

    def _on_message(self, _c: mqtt.Client, _u: Any, m: mqtt.MQTTMessage) -> None:
        msg = Message(m.topic, bytes(m.payload), bool(m.retain))
        self.seen.append(msg)
        self.messages.put(msg)

    def publish(self, topic: str, payload: bytes | str | dict[str, Any] | list[Any], *,
                retain: bool = False) -> None:
        """Publish at QoS 1 without waiting (the embedded broker may share the caller's loop)."""
        if isinstance(payload, dict | list):
            payload = json.dumps(payload)
        self.client.publish(topic, payload, qos=1, retain=retain)

    async def wait_for(self, predicate: Callable[[Message], bool], limit_s: float = 20.0) -> Message:
        """The first message not yet returned (in arrival order) that satisfies the predicate."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            while not self.messages.empty():
                self._pending.append(self.messages.get_nowait())
            for i, msg in enumerate(self._pending):
                if predicate(msg):
                    del self._pending[i]
                    return msg
            await asyncio.sleep(0.01)
        raise TimeoutError("no such message; seen: " + ", ".join(m.topic for m in self.seen[-30:]))

    def close(self) -> None:
        """Disconnect and join the thread."""
        self.client.disconnect()
        self.client.loop_stop()


def topic_is(topic: str, **fields: Any) -> Callable[[Message], bool]:
    """A predicate: this topic and (for JSON payloads) these field values."""
    def check(m: Message) -> bool:
        if m.topic != topic:
            return False
        if not fields:
            return True
        data = m.json()
        return all(data.get(k) == v for k, v in fields.items())
    return check


class LiveHub:
    """A dialogue loop ticking in real time, bridged to MQTT; audio can be queued as the mic."""

    def __init__(self, settings: Settings, engines: Engines, agent: Agent) -> None:
        """Build the loop and bridge (not started)."""
        self.settings = settings
        self.engines = engines
        self.agent = agent
        self.log = EventLog()
        self.loop = DialogueLoop(settings, engines, agent, clock=Clock(realtime=True), events=self.log)
        self.bridge = MqttBridge(settings, self.loop)
        self.log.listeners.append(self.bridge.on_event)
        self._mic: list[Int16Array] = []
        self._task: asyncio.Task[None] | None = None

    def speak(self, audio: Int16Array) -> None:
        """Queue audio for the microphone."""
        self._mic.append(audio)

    def hear(self, text: str, confidence: float = 0.97) -> None:
        """A turn as if the recogniser had heard these words (the frame enters at the head)."""
        self.loop.pipeline.push(TranscriptFrame(text=text, tier="grammar", confidence=confidence, open_text=text))

    async def _drive(self) -> None:
        n = self.settings.audio.chunk_size
        frame_s = self.settings.frame_ms / 1000
        pending = np.zeros(0, np.int16)
        self.loop.clock.start()
        t0 = time.perf_counter()
        i = 0
        while True:
            if len(pending) < n and self._mic:
                pending = np.concatenate([pending, self._mic.pop(0)])
            frame, pending = pending[:n], pending[n:]
            frame = np.pad(frame, (0, n - len(frame)))
            self.loop.tick(frame, self.loop.clock.now_ms())
            i += 1
            await asyncio.sleep(max(0.0, t0 + i * frame_s - time.perf_counter()))

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The loop's events of one type."""
        return [e for e in self.log.events if e["type"] == kind]

    async def __aenter__(self) -> LiveHub:
        """Start loop, bridge and ticks; wait until connected."""
        await self.loop.start()
        await self.bridge.start()
        self._task = asyncio.create_task(self._drive(), name="test.drive")
        assert self.bridge.link is not None
        async with asyncio.timeout(10):
            await self.bridge.link.ready.wait()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        """Stop everything."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.bridge.stop()
        await self.loop.stop()


def mqtt_settings(base: Settings, tmp: Path, *, port: int, embedded: bool, **mqtt_kw: Any) -> Settings:
    """Settings pointing at a broker on 127.0.0.1:port (or an embedded one there)."""
    m = replace(base.mqtt, host=None if embedded else "127.0.0.1", port=port,
                outbox=str(tmp / "outbox.db"), hub_id="testhub", reconnect_max_s=0.5, **mqtt_kw)
    return replace(base, mqtt=m, site_id="kitchen")
