"""Home Assistant tests: HA core, its real MQTT integration, a real mosquitto, a real hub.

Run in their own pytest run and venv (``.venv-ha``: homeassistant 2025.4.4 and
pytest-homeassistant-custom-component); the hub's tests run without this plugin.
"""

# ruff: noqa: I001  (the component is imported first: the harness looks it up)
from __future__ import annotations

import custom_components.duplex_hub  # noqa: F401

import asyncio
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_socket
from homeassistant.components import mqtt
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import HomeAssistant
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import entity_registry as er
from homeassistant.setup import async_setup_component
from pytest_homeassistant_custom_component.common import MockConfigEntry

from custom_components.duplex_hub.const import CONF_BASE_TOPIC, CONF_HUB_ID, CONF_NAME, DOMAIN

from ..mosquitto import Mosquitto

ROOT = Path(__file__).resolve().parents[2]
HUB_VENV = Path(os.environ.get("DUPLEX_HUB_VENV", ROOT / ".venv"))
HUB_ID = "test_hub"
BASE = f"duplex_hub/{HUB_ID}"
RETAINED = ("availability", "state", "controller", "catalog")


@pytest.fixture(autouse=True)
def auto_enable_custom_integrations(enable_custom_integrations: None) -> None:
    """Load custom_components/duplex_hub."""


@pytest.fixture(scope="session")
def broker() -> Iterator[Mosquitto]:
    """One real mosquitto for the session."""
    pytest_socket.enable_socket()  # only the tests that use it keep sockets (``socket_enabled``)
    with tempfile.TemporaryDirectory() as tmp:
        b = Mosquitto(Path(tmp))
        b.start()
        yield b
        b.stop()


@pytest.fixture
async def mqtt_entry(hass: HomeAssistant, broker: Mosquitto, socket_enabled: None,
                     mock_hass_config: None) -> MockConfigEntry:
    """Home Assistant's real MQTT integration, connected to the broker."""
    entry = MockConfigEntry(domain=mqtt.DOMAIN, title="MQTT", version=1, minor_version=2,
                            data={mqtt.CONF_BROKER: "127.0.0.1", "port": broker.port},
                            options={mqtt.CONF_BIRTH_MESSAGE: {}, "discovery": True})
    entry.add_to_hass(hass)
    assert await async_setup_component(hass, "homeassistant", {})
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    assert await mqtt.async_wait_for_mqtt_client(hass)
    for relative in RETAINED:  # the broker lives for the session: forget earlier tests' hubs
        for hub_id in (HUB_ID, "other_hub"):
            await mqtt.async_publish(hass, f"duplex_hub/{hub_id}/{relative}", "", qos=1, retain=True)
    for hub_id in (HUB_ID, "other_hub"):
        await mqtt.async_publish(hass, f"duplex_hub/discovery/{hub_id}", "", qos=1, retain=True)
    return entry


async def publish(hass: HomeAssistant, topic: str, payload: Any, *, retain: bool = False) -> None:
    """Publish through Home Assistant's MQTT (JSON for dicts)."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    await mqtt.async_publish(hass, topic, data, qos=1, retain=retain)


@pytest.fixture
async def home(hass: HomeAssistant, mqtt_entry: MockConfigEntry) -> dict[str, str]:
    """Two template lights: the kitchen one exposed to Assist, the porch one not."""
    assert await async_setup_component(hass, "conversation", {})
    assert await async_setup_component(hass, "input_boolean", {"input_boolean": {
        "kitchen_power": {"name": "kitchen power"}, "porch_power": {"name": "porch power"}}})

    def light(key: str, name: str) -> dict[str, Any]:
        target = {"entity_id": f"input_boolean.{key}_power"}
        return {"unique_id": f"{key}_light", "friendly_name": name,
                "value_template": f"{{{{ is_state('input_boolean.{key}_power', 'on') }}}}",
                "turn_on": {"action": "input_boolean.turn_on", "target": target},
                "turn_off": {"action": "input_boolean.turn_off", "target": target}}

    assert await async_setup_component(hass, "light", {"light": [{"platform": "template", "lights": {
        "kitchen_light": light("kitchen", "Kitchen Light"), "porch_light": light("porch", "Porch Light")}}]})
    await hass.async_block_till_done()
    kitchen = ar.async_get(hass).async_create("Kitchen")
    porch = ar.async_get(hass).async_create("Porch")
    ents = er.async_get(hass)
    ents.async_update_entity("light.kitchen_light", area_id=kitchen.id, aliases={"ceiling light"})
    ents.async_update_entity("light.porch_light", area_id=porch.id)
    for entity_id in ("input_boolean.kitchen_power", "input_boolean.porch_power", "light.porch_light"):
        async_expose_entity(hass, "conversation", entity_id, False)
    async_expose_entity(hass, "conversation", "light.kitchen_light", True)
    return {"kitchen": "light.kitchen_light", "porch": "light.porch_light"}


def hub_entry(hass: HomeAssistant, **options: Any) -> MockConfigEntry:
    """A config entry for the test hub (not set up)."""
    entry = MockConfigEntry(domain=DOMAIN, unique_id=HUB_ID, title="Test Hub", options=options,
                            data={CONF_HUB_ID: HUB_ID, CONF_BASE_TOPIC: BASE, CONF_NAME: "Test Hub"})
    entry.add_to_hass(hass)
    return entry


def hub_config(tmp: Path, port: int, **extra: Any) -> Path:
    """A hub configuration YAML for the broker (JSON is YAML)."""
    cfg = {"mqtt": {"host": "127.0.0.1", "port": port, "hub_id": HUB_ID, "name": "Test Hub",
                    "outbox": str(tmp / "outbox.db"), "reconnect_max_s": 1},
           "llm": {"enabled": False}, "site_id": "kitchen", **extra}
    path = tmp / "hub.yaml"
    path.write_text(json.dumps(cfg))
    return path


def speech_wav(tmp: Path, text: str, *, lead_s: float, tail_s: float) -> Path:
    """A spoken command (Piper, through the hub's venv) between silences, 16 kHz mono."""
    out = tmp / "command.wav"
    code = ("import sys, wave, numpy as np; from hub_runtime.audio.synthetic import speak; "
            "z = lambda s: np.zeros(int(16000 * s), np.int16); "
            "a = np.concatenate([z(float(sys.argv[3])), speak(sys.argv[1]), z(float(sys.argv[4]))]); "
            "w = wave.open(sys.argv[2], 'wb'); w.setnchannels(1); w.setsampwidth(2); "
            "w.setframerate(16000); w.writeframes(a.tobytes()); w.close()")
    subprocess.run([str(HUB_VENV / "bin" / "python"), "-c", code, text, str(out), str(lead_s), str(tail_s)],
                   check=True, timeout=120)
    return out


async def wait_until(hass: HomeAssistant, check: Any, timeout_s: float = 30.0, what: str = "") -> None:
    """Until ``check()`` is true, letting Home Assistant run."""
    loop = hass.loop
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await hass.async_block_till_done()
        await asyncio.sleep(0.05)


class Collector:
    """Messages on one topic, received through Home Assistant's MQTT."""

    def __init__(self) -> None:
        """Nothing yet."""
        self.messages: list[mqtt.ReceiveMessage] = []

    def __call__(self, msg: mqtt.ReceiveMessage) -> None:
        """A message."""
        self.messages.append(msg)

    def json(self) -> list[Any]:
        """The payloads that are JSON."""
        out = []
        for m in self.messages:
            try:
                out.append(json.loads(m.payload))
            except ValueError:
                continue
        return out


async def collect(hass: HomeAssistant, topic: str) -> Collector:
    """Subscribe a collector (and give HA the ~0.5 s it may take to send the subscription)."""
    c = Collector()
    unsub = await mqtt.async_subscribe(hass, topic, c)
    c.unsubscribe = unsub  # type: ignore[attr-defined]
    await asyncio.sleep(1.0)
    return c


class HubProcess:
    """The real ``hub-runtime run --mqtt`` in a child process."""

    def __init__(self, config: Path, wav: Path, linger_s: float, log: Path) -> None:
        """Ready to start."""
        self.args = [str(HUB_VENV / "bin" / "hub-runtime"), "-v", "run", "--config", str(config),
                     "--input", str(wav), "--mqtt", "--linger", str(linger_s)]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Run it (its output goes to the log file)."""
        assert self.proc is None, "started twice"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> int | None:
        """Terminate (if still running) and return its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@pytest.fixture
def hub_process(tmp_path: Path, broker: Mosquitto) -> Iterator[HubProcess]:
    """A hub that idles on silence for a while, bridged to the broker (not started)."""
    wav = tmp_path / "silence.wav"
    subprocess.run([str(HUB_VENV / "bin" / "python"), "-c",
                    "import sys, wave; w = wave.open(sys.argv[1], 'wb'); w.setnchannels(1); "
                    "w.setsampwidth(2); w.setframerate(16000); w.writeframes(bytes(32000)); w.close()",
                    str(wav)], check=True)
    hub = HubProcess(hub_config(tmp_path, broker.port, asr={"second_tier": "none"}), wav,
                     linger_s=300, log=tmp_path / "hub.log")
    yield hub  # started by the test, once Home Assistant is ready
    hub.stop()
