"""The MQTT interface against a real mosquitto and the embedded amqtt broker."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hub_runtime.agent import Agent
from hub_runtime.engines import Engines
from hub_runtime.settings import Settings

from .mqtt_helpers import LiveHub, Mosquitto, Watcher, free_port, mqtt_settings, topic_is

BASE = "duplex_hub/testhub"


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A real broker for one test."""
    broker = Mosquitto(tmp_path)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def fresh(shared_engines: Engines) -> Callable[[Settings], LiveHub]:
    """A hub over the shared models with a fresh home for these settings."""
    def make(s: Settings) -> LiveHub:
        return LiveHub(s, shared_engines, Agent.from_settings(s))
    return make


@pytest.mark.parametrize("broker", ["mosquitto", "amqtt"])
def test_every_topic_round_trip(broker: str, request: pytest.FixtureRequest, tmp_path: Path,
                                settings: Settings, fresh: Callable[[Settings], LiveHub]) -> None:
    if broker == "mosquitto":
        port, embedded = request.getfixturevalue("mosquitto").port, False
    else:
        port, embedded = free_port(), True
    s = mqtt_settings(settings, tmp_path, port=port, embedded=embedded)

    async def go() -> None:
        async with fresh(s) as hub:
            w = await asyncio.to_thread(Watcher, port, ["duplex_hub/#", "hermes/#"])
            try:
                await _exercise(hub, w)
            finally:
                await asyncio.to_thread(w.close)
        # after the hub stops: offline, retained
        w2 = await asyncio.to_thread(Watcher, port, [f"{BASE}/availability"]) if not embedded else None
        if w2 is not None:
            msg = await w2.wait_for(topic_is(f"{BASE}/availability"))
            assert msg.payload == b"offline" and msg.retain
            await asyncio.to_thread(w2.close)

    asyncio.run(go())


async def _exercise(hub: LiveHub, w: Watcher) -> None:
    # retained availability and discovery
    avail = await w.wait_for(topic_is(f"{BASE}/availability"))
    assert avail.payload == b"online" and avail.retain
    disc = (await w.wait_for(topic_is("duplex_hub/discovery/testhub"))).json()
    assert disc["base_topic"] == BASE and disc["id"] == "testhub" and "hermes" in disc["capabilities"]
    assert disc["availability_topic"] == f"{BASE}/availability" and disc["version"]

    # ask -> response with the request id, and the intent (QoS 1) with that request id
    w.publish(f"{BASE}/ask", {"id": "q1", "text": "turn on the kitchen light", "conversation_id": "c9"})
    resp = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q1"))).json()
    assert resp["conversation_id"] == "c9" and resp["source"] == "grammar" and resp["success"]
    assert resp["intent"]["name"] == "HassTurnOn" and resp["intent"]["targets"] == ["light.kitchen"]
    intent = (await w.wait_for(topic_is(f"{BASE}/intent", request_id="q1"))).json()
    assert intent["intent"]["targets"] == ["light.kitchen"] and intent["site"] == "kitchen"
    assert intent["id"] and intent["timestamps"]["time"] and intent["confidence"] == 1.0
    # the Hermes view of the same intent
    her = (await w.wait_for(topic_is("hermes/intent/HassTurnOn"))).json()
    assert her["input"] == "turn on the kitchen light" and her["siteId"] == "kitchen"
    assert her["intent"] == {"intentName": "HassTurnOn", "confidenceScore": 1.0}
    assert her["sessionId"] and {"slotName", "rawValue", "value", "entity"} <= set(her["slots"][0])
    by_name = {x["slotName"]: x for x in her["slots"]}
    assert by_name["name"]["value"] == {"kind": "Custom", "value": "Kitchen Light"}
    # a question about state does not change it
    w.publish(f"{BASE}/ask", {"id": "q2", "text": "is the kitchen light on"})
    resp = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q2"))).json()
    assert resp["intent"]["name"] == "HassGetState" and resp["response"] == "Yes"

    # spoken intent: a transcript through the loop publishes an intent with speech fields
    hub.hear("turn off the office fan")
    intent = (await w.wait_for(lambda m: m.topic == f"{BASE}/intent"
                               and m.json()["request_id"] is None)).json()
    assert intent["intent"]["name"] == "HassTurnOff" and intent["intent"]["targets"] == ["fan.office"]
    assert intent["source"] == "grammar" and intent["confidence"] == 0.97
    await w.wait_for(topic_is(f"{BASE}/event/response"))

    # say (queued and interrupting) -> the hub speaks; state goes to speaking and back
    w.publish(f"{BASE}/say", {"text": "Dinner is ready.", "id": "s1"})
    await w.wait_for(topic_is(f"{BASE}/event/tts_start"))
    await w.wait_for(topic_is(f"{BASE}/state", state="speaking"))
    w.publish(f"{BASE}/say", {"text": "Sorry, one more thing.", "interrupt": True})
    await w.wait_for(topic_is(f"{BASE}/event/tts_cancelled"))
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Sorry, one more thing."))
    w.publish(f"{BASE}/say", "Plain text works too.")
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Plain text works too."))

    # mute / unmute / volume -> retained state
    w.publish(f"{BASE}/mute", b"")
    await w.wait_for(topic_is(f"{BASE}/state", muted=True))
    assert hub.loop.status().muted
    w.publish(f"{BASE}/unmute", b"")
    await w.wait_for(topic_is(f"{BASE}/state", muted=False))
    w.publish(f"{BASE}/volume", {"volume": 0.5})
    await w.wait_for(topic_is(f"{BASE}/state", volume=0.5))
    assert hub.loop.status().volume == 0.5

    # session start / end with text
    w.publish(f"{BASE}/session/start", {"text": "Yes?"})
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Yes?"))
    w.publish(f"{BASE}/session/end", b"{}")

    # intent/result from elsewhere is spoken
    w.publish(f"{BASE}/intent/result", {"id": intent["id"], "text": "The fan is off now.", "success": True})
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="The fan is off now."))

    # catalog (retained) replaces the file catalog
    w.publish(f"{BASE}/catalog", {"entities": [
        {"entity_id": "light.lava_lamp", "name": "Lava Lamp", "area": "Den"},
        {"entity_id": "switch.kettle", "name": "Kettle", "area": "Kitchen"}]}, retain=True)
    await w.wait_for(topic_is(f"{BASE}/event/catalog_applied", entities=2))
    w.publish(f"{BASE}/ask", {"id": "q3", "text": "turn on the lava lamp"})
    resp = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q3"))).json()
    assert resp["intent"]["targets"] == ["light.lava_lamp"]
    w.publish(f"{BASE}/catalog", b"", retain=True)  # clear the retained catalog (and drop it: empty)

    # Hermes in
    w.publish("hermes/nlu/query", {"input": "turn on the kettle", "id": "h1", "sessionId": "hs"})
    her = (await w.wait_for(topic_is("hermes/intent/HassTurnOn", id="h1"))).json()
    assert her["sessionId"] == "hs" and her["slots"]
    w.publish("hermes/nlu/query", {"input": "what is the meaning of life", "id": "h2"})
    nr = (await w.wait_for(topic_is("hermes/nlu/intentNotRecognized"))).json()
    assert nr["id"] == "h2" and nr["input"] == "what is the meaning of life"
    w.publish("hermes/tts/say", {"text": "Hello from Hermes.", "siteId": "kitchen", "id": "t1"})
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Hello from Hermes."))
    w.publish("hermes/tts/say", {"text": "Not for this room.", "siteId": "garage"})
    w.publish("hermes/dialogueManager/continueSession", {"sessionId": "hs", "text": "Anything else?"})
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Anything else?"))
    w.publish("hermes/dialogueManager/endSession", {"sessionId": "hs", "text": "Bye."})
    await w.wait_for(topic_is("hermes/dialogueManager/sessionEnded", sessionId="hs"))
    await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Bye."))
    assert not [e for e in hub.events("tts_end") if e["text"] == "Not for this room."]

    # bad input: logged, counted, dropped; the hub still answers
    before = hub.bridge.rejections.total
    for topic, payload in [(f"{BASE}/ask", b"{not json"), (f"{BASE}/ask", b'{"text": 5, "id": "x"}'),
                           (f"{BASE}/volume", b'{"volume": 99}'), (f"{BASE}/say", b"\xff\xfe"),
                           (f"{BASE}/catalog", b'{"entities": [{"entity_id": "nodot"}]}'),
                           (f"{BASE}/intent/result", b'{"id": "r", "targets": ["light.nope"]}'),
                           ("hermes/tts/say", b"[1, 2]"), (f"{BASE}/say", b"x" * 70000)]:
        w.publish(topic, payload)
    w.publish(f"{BASE}/ask", {"id": "q4", "text": "what time is it"})
    resp = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q4"))).json()
    assert resp["intent"]["name"] == "HassGetCurrentTime"
    assert hub.bridge.rejections.total - before == 8
    assert not hub.events("error")


def test_broker_killed_and_restarted_loses_no_intent(mosquitto: Mosquitto, tmp_path: Path,
                                                     settings: Settings,
                                                     fresh: Callable[[Settings], LiveHub]) -> None:
    s = mqtt_settings(settings, tmp_path, port=mosquitto.port, embedded=False)
    texts = ["turn on the kitchen light", "turn off the kitchen light", "turn off the office fan"]
    n = 30

    async def go() -> list[dict[str, Any]]:
        # a persistent subscriber session: the broker keeps its messages across the restart
        w = await asyncio.to_thread(Watcher, mosquitto.port, [f"{BASE}/intent"],
                                    client_id="durable-watcher", persistent=True)
        await asyncio.sleep(1.5)  # mosquitto saves the session to disk (autosave_interval 1)
        async with fresh(s) as hub:
            for i in range(n):
                if i == 10:
                    await asyncio.to_thread(mosquitto.kill)
                if i == 20:
                    await asyncio.to_thread(mosquitto.start)
                hub.hear(texts[i % 3])
                await asyncio.sleep(0.15)
            sent = [e["id"] for e in hub.events("intent")]
            assert hub.bridge.outbox is not None and hub.bridge.link is not None
            try:
                await w.wait_for(lambda m: len({json.loads(x.payload)["id"] for x in w.seen}) >= n, 30)
            except TimeoutError:
                got = {json.loads(x.payload)["id"] for x in w.seen}
                missing = [sent.index(i) for i in sent if i not in got]
                raise AssertionError(f"{len(got)} of {len(sent)} intents arrived; missing #{missing}; "
                                     f"outbox holds {len(hub.bridge.outbox)}; "
                                     f"connections {hub.bridge.link.connections}") from None
            sent = [e["id"] for e in hub.events("intent")]
            await asyncio.sleep(0.3)
            assert len(hub.bridge.outbox) == 0
        await asyncio.to_thread(w.close)
        got = [json.loads(m.payload)["id"] for m in w.seen]
        first_seen = list(dict.fromkeys(got))
        assert first_seen == sent  # none lost, order kept (duplicates keep their id)
        return [json.loads(m.payload) for m in w.seen]

    asyncio.run(go())


def test_catalog_update_changes_what_is_heard(tmp_path: Path, settings: Settings,
                                             fresh: Callable[[Settings], LiveHub],
                                             voice: Callable[..., Any]) -> None:
    port = free_port()
    s = mqtt_settings(settings, tmp_path, port=port, embedded=True)
    import numpy as np

    async def go() -> None:
        async with fresh(s) as hub:
            w = await asyncio.to_thread(Watcher, port, [f"{BASE}/#"])
            w.publish(f"{BASE}/catalog", [{"entity_id": "light.lava_lamp", "name": "Lava Lamp",
                                           "area": "Den"}])
            await w.wait_for(topic_is(f"{BASE}/event/catalog_applied"))
            hub.speak(np.concatenate([voice("turn on the lava lamp"), np.zeros(16000, np.int16)]))
            intent = (await w.wait_for(topic_is(f"{BASE}/intent"), 30)).json()
            assert intent["intent"]["targets"] == ["light.lava_lamp"]
            assert intent["timestamps"]["speech_start_ms"] is not None
            await asyncio.to_thread(w.close)

    asyncio.run(go())


def test_mqtt5_and_a_refused_login(mosquitto: Mosquitto, tmp_path: Path, settings: Settings,
                                   fresh: Callable[[Settings], LiveHub]) -> None:
    s = mqtt_settings(settings, tmp_path, port=mosquitto.port, embedded=False, protocol="5")

    async def go() -> None:
        async with fresh(s) as hub:
            import paho.mqtt.client as mqtt

            w = await asyncio.to_thread(Watcher, mosquitto.port, [f"{BASE}/#"], protocol=mqtt.MQTTv5)
            w.publish(f"{BASE}/ask", {"id": "v5", "text": "turn on the kitchen light"})
            await w.wait_for(topic_is(f"{BASE}/ask/response", id="v5"))
            await w.wait_for(topic_is(f"{BASE}/intent"))
            assert hub.bridge.link is not None and hub.bridge.link.connections == 1
            await asyncio.to_thread(w.close)

    asyncio.run(go())


def test_a_controller_executes_intents_and_the_hub_speaks_its_result(
        tmp_path: Path, settings: Settings, fresh: Callable[[Settings], LiveHub]) -> None:
    port = free_port()
    s = mqtt_settings(settings, tmp_path, port=port, embedded=True)

    async def go() -> None:
        async with fresh(s) as hub:
            w = await asyncio.to_thread(Watcher, port, [f"{BASE}/#"])
            kitchen = hub.agent.model.catalog.get("light.kitchen")
            assert kitchen is not None and kitchen.state == "off"
            w.publish(f"{BASE}/controller", {"name": "Home Assistant", "timeout_s": 0.8}, retain=True)
            for _ in range(100):
                if hub.agent.controller is not None:
                    break
                await asyncio.sleep(0.02)
            assert hub.agent.controller is not None

            # a spoken intent waits for the controller's result and speaks it; the hub does not act
            hub.hear("turn on the kitchen light")
            intent = (await w.wait_for(topic_is(f"{BASE}/intent"))).json()
            assert await w.wait_for(topic_is(f"{BASE}/state", state="thinking"))
            w.publish(f"{BASE}/intent/result", {"id": intent["id"], "text": "Turned on the light",
                                                "success": True, "targets": ["light.kitchen"]})
            resp = (await w.wait_for(topic_is(f"{BASE}/event/response"))).json()
            assert resp["text"] == "Turned on the light"
            await w.wait_for(topic_is(f"{BASE}/event/tts_end", text="Turned on the light"))
            assert kitchen.state == "off"  # Home Assistant owns the state now

            # ask: the intent is for the asker to execute; the reply is the hub's rendering
            w.publish(f"{BASE}/ask", {"id": "q1", "text": "turn on the kitchen light"})
            r = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q1"))).json()
            assert r["intent"]["targets"] == ["light.kitchen"] and r["response"] and r["success"]
            assert kitchen.state == "off"

            # a result with no text: the hub says its own rendering
            hub.hear("turn on the kitchen light")
            quiet = (await w.wait_for(topic_is(f"{BASE}/intent", request_id=None))).json()
            w.publish(f"{BASE}/intent/result", {"id": quiet["id"], "success": True})
            resp = (await w.wait_for(topic_is(f"{BASE}/event/response"))).json()
            assert resp["text"] == r["response"]

            # the controller's states arrive as a catalog with the same names: no rebuild
            model = hub.agent.model
            catalog = model.catalog.to_dict()
            for e in catalog["entities"]:
                if e["entity_id"] == "light.kitchen":
                    e["state"] = "on"
            w.publish(f"{BASE}/catalog", catalog)
            applied = (await w.wait_for(topic_is(f"{BASE}/event/catalog_applied"))).json()
            assert applied["rebuilt"] is False and hub.agent.model is model
            assert kitchen.state == "on"

            # no answer in time: an apology, and the loop goes on
            hub.hear("turn off the office fan")
            late = (await w.wait_for(topic_is(f"{BASE}/intent", request_id=None))).json()
            resp = (await w.wait_for(lambda m: m.topic == f"{BASE}/event/response"
                                     and "did not answer" in m.json()["text"])).json()
            assert resp["text"] == "Sorry, Home Assistant did not answer."
            assert hub.agent.results.waiting == 0

            # a result that fails with no text: the hub says so
            hub.hear("turn off the office fan")
            intent = (await w.wait_for(topic_is(f"{BASE}/intent", request_id=None))).json()
            assert intent["id"] != late["id"]
            w.publish(f"{BASE}/intent/result", {"id": intent["id"], "success": False})
            await w.wait_for(topic_is(f"{BASE}/event/response", text="Sorry, that did not work."))

            # an empty controller payload makes the hub standalone again
            w.publish(f"{BASE}/controller", b"", retain=True)
            for _ in range(100):
                if hub.agent.controller is None:
                    break
                await asyncio.sleep(0.02)
            w.publish(f"{BASE}/ask", {"id": "q2", "text": "turn on the office fan"})
            r = (await w.wait_for(topic_is(f"{BASE}/ask/response", id="q2"))).json()
            assert r["response"] and hub.agent.model.catalog.get("fan.office").state == "on"
            await asyncio.to_thread(w.close)

    asyncio.run(go())
