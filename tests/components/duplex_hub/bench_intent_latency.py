"""Benchmark (not a test; run by bench/ha.sh): a hub's intent publish -> the entity's state change.

The intent goes through the real broker into Home Assistant's MQTT, this component, HA's
intent machinery and a template light; the clock stops at the light's state_changed event.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from homeassistant.core import Event, HomeAssistant, callback

from ..conftest import BASE, hub_entry, publish

RUNS = 60


async def test_bench_intent_to_state_change(hass: HomeAssistant, home: dict[str, str]) -> None:
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    await asyncio.sleep(1.0)  # HA sends its subscriptions late
    changed = asyncio.Event()

    @callback
    def on_change(event: Event) -> None:
        if event.data["entity_id"] == home["kitchen"]:
            changed.set()
    hass.bus.async_listen("state_changed", on_change)
    samples = []
    for i in range(RUNS):
        name = "HassTurnOn" if i % 2 == 0 else "HassTurnOff"
        changed.clear()
        t0 = time.perf_counter()
        await publish(hass, f"{BASE}/intent", {"id": f"b{i}", "text": "", "request_id": None, "intent": {
            "name": name, "slots": {"name": "Kitchen Light", "domain": "light"}, "targets": []}})
        async with asyncio.timeout(10):
            await changed.wait()
        samples.append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(0.05)
    q = statistics.quantiles(samples, n=20)
    print(f"\nintent publish -> HA state change ({RUNS} runs): p50 {statistics.median(samples):.1f} ms, "
          f"p95 {q[18]:.1f} ms, min {min(samples):.1f} ms, max {max(samples):.1f} ms")
