"""MQTT benchmarks through a real mosquitto.

Intent publish → receipt at a subscriber, p50/p95; sustained intents per second;
broker restart → outbox drained.

The hub side is the hub's own link and outbox (the path every intent takes); the subscriber
is a plain paho client in its own thread. Usage: .venv/bin/python bench/mqtt.py [N]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from hub_runtime.mqtt.client import MqttLink
from hub_runtime.mqtt.outbox import Outbox
from hub_runtime.settings import MqttSettings
from tests.hub_runtime.mqtt_helpers import Mosquitto

TOPIC = "duplex_hub/bench/intent"


class Subscriber:
    """Records when each intent id arrives (first arrival only)."""

    def __init__(self, port: int) -> None:
        """Subscribe on this port."""
        self.arrived: dict[int, float] = {}
        self.lock = threading.Lock()
        ready = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bench-sub", clean_session=False)
        self.client.reconnect_delay_set(0.02, 0.1)
        self.client.on_connect = lambda c, *_: c.subscribe(TOPIC, qos=1)
        self.client.on_subscribe = lambda *_: ready.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, keepalive=10)
        self.client.loop_start()
        ready.wait(10)

    def _on_message(self, _c: Any, _u: Any, m: mqtt.MQTTMessage) -> None:
        now = time.perf_counter()
        n = json.loads(m.payload)["n"]
        with self.lock:
            self.arrived.setdefault(n, now)

    def count(self) -> int:
        with self.lock:
            return len(self.arrived)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _payload(n: int) -> bytes:
    # about the size of a real intent message
    return json.dumps({"id": f"{n:032x}", "n": n, "site": "kitchen", "text": "turn on the kitchen light",
                       "intent": {"name": "HassTurnOn", "slots": {"name": "Kitchen Light"},
                                  "targets": ["light.kitchen"]}, "confidence": 0.97, "source": "grammar",
                       "timestamps": {"time": "2026-12-03T07:00:00.000+00:00"}}).encode()


async def _until(cond: Any, limit_s: float = 60.0) -> None:
    deadline = time.perf_counter() + limit_s
    while not cond():
        if time.perf_counter() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.001)


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] if len(xs) > 1 else xs[0]


async def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-mqtt-"))
    broker = Mosquitto(tmp)
    broker.start()
    sub = Subscriber(broker.port)
    box = Outbox(tmp / "outbox.db", 100_000)
    settings = MqttSettings(host="127.0.0.1", port=broker.port, reconnect_max_s=0.2)
    link = MqttLink(settings, host="127.0.0.1", port=broker.port, outbox=box, subscriptions=[],
                    will=("duplex_hub/bench/availability", b"offline"), on_message=lambda *_: None,
                    on_connected=lambda: None)
    await link.start()
    await link.connected.wait()
    seq = 0

    # 1. latency, one intent at a time (10 ms apart, as a busy house would never reach)
    sent: dict[int, float] = {}
    for _ in range(n):
        seq += 1
        sent[seq] = time.perf_counter()
        link.publish_reliable(TOPIC, _payload(seq))
        await asyncio.sleep(0.01)
    await _until(lambda: all(k in sub.arrived for k in sent))
    lat = [(sub.arrived[k] - t) * 1000 for k, t in sent.items()]
    print(f"publish -> receipt (mosquitto, QoS 1, outbox on disk), {n} intents: "
          f"p50 {statistics.median(lat):.2f} ms, p95 {pct(lat, 95):.2f} ms, max {max(lat):.2f} ms")

    # 2. sustained rate: a burst, until the subscriber has all of it and the outbox is empty
    rates = []
    for _ in range(3):
        burst = 5 * n
        first = seq + 1
        t0 = time.perf_counter()
        for _ in range(burst):
            seq += 1
            link.publish_reliable(TOPIC, _payload(seq))
            if seq % 50 == 0:
                await asyncio.sleep(0)
        last = seq
        await _until(lambda last=last, first=first: all(k in sub.arrived for k in range(first, last + 1))
                     and len(box) == 0)
        rates.append(burst / (time.perf_counter() - t0))
    print(f"sustained: median {statistics.median(rates):.0f} intents/s (runs: "
          + ", ".join(f"{r:.0f}" for r in rates) + ")")

    # 3. broker restart: intents made while it is down wait on disk; time from the broker
    # listening again to the outbox drained (all acknowledged) and to the subscriber having them
    drain, deliver = [], []
    for _ in range(5):
        broker.kill()
        await _until(lambda: not link.connected.is_set())
        first = seq + 1
        for _ in range(200):
            seq += 1
            link.publish_reliable(TOPIC, _payload(seq))
        last = seq
        t0 = time.perf_counter()
        await asyncio.to_thread(broker.start)
        await _until(lambda: len(box) == 0)
        drain.append((time.perf_counter() - t0) * 1000)
        await _until(lambda last=last, first=first: all(k in sub.arrived for k in range(first, last + 1)))
        deliver.append((time.perf_counter() - t0) * 1000)
    print(f"broker restart -> outbox of 200 drained: median {statistics.median(drain):.0f} ms "
          f"(max {max(drain):.0f}); -> all at the subscriber: median {statistics.median(deliver):.0f} ms; "
          f"reconnects {link.connections - 1}; lost {seq - sub.count()}")

    await link.stop()
    box.close()
    sub.close()
    broker.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
