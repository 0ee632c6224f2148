"""Inbound payload validation (fuzzed) and the outbox, without a broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub_runtime import protocol as t
from hub_runtime.mqtt import hermes
from hub_runtime.mqtt.bridge import CatalogUpdate, parse_inbound
from hub_runtime.mqtt.outbox import Outbox

INBOUND = (*t.COMMANDS, *hermes.INBOUND)
LIMIT = 4096

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
_keys = st.sampled_from(["text", "id", "volume", "interrupt", "conversation_id", "language", "speak",
                         "success", "targets", "entities", "siteId", "sessionId", "input", "entity_id",
                         "name", "area", "aliases", "state", "attributes"])
_objects = st.dictionaries(_keys, _json_values, max_size=6)
_payloads = (
    st.binary(max_size=300)
    | _json_values.map(lambda v: json.dumps(v).encode())
    | _objects.map(lambda v: json.dumps(v).encode())
    | st.lists(st.dictionaries(_keys, _json_values, max_size=6), max_size=3).map(lambda v: json.dumps(v).encode())
    | st.text(max_size=50).map(str.encode)
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topic=st.sampled_from(INBOUND), payload=_payloads)
def test_fuzzed_payloads_give_a_command_or_bad_payload(topic: str, payload: bytes) -> None:
    try:
        command = parse_inbound(topic, payload, max_bytes=LIMIT)
    except t.BadPayload as err:
        assert str(err)  # a reason to log
        return
    # what got through is well-typed
    if isinstance(command, t.Say | hermes.HermesSay):
        assert isinstance(command.text, str) and command.text
    if isinstance(command, t.Volume):
        assert 0.0 <= command.volume <= 4.0
    if isinstance(command, t.Ask):
        assert command.text and command.id and isinstance(command.id, str)


@pytest.mark.parametrize(("topic", "payload", "reason"), [
    (t.ASK, b"{", "not JSON"),
    (t.ASK, b'{"text": "hi"}', "id"),
    (t.ASK, b'{"text": 5, "id": "a"}', "text: is not a string"),
    (t.SAY, b"   ", "text: is empty"),
    (t.SAY, b"\xff", "not UTF-8"),
    (t.VOLUME, b"loud", "is not a number"),
    (t.VOLUME, b"NaN", "is not a number"),
    (t.VOLUME, b'{"volume": 9}', "out of range"),
    (t.CATALOG, b'[{"entity_id": "light.x"}]', "name"),
    (hermes.TTS_SAY, b"[]", "not a JSON object"),
    (t.SAY, b"x" * (LIMIT + 1), "larger than the limit"),
])
def test_bad_payloads_name_the_reason(topic: str, payload: bytes, reason: str) -> None:
    with pytest.raises(t.BadPayload, match=reason):
        parse_inbound(topic, payload, max_bytes=LIMIT)


@pytest.mark.parametrize(("topic", "payload", "expected"), [
    (t.SAY, b"Dinner is ready", t.Say(text="Dinner is ready")),
    (t.SAY, b'{"text": "Now", "interrupt": true, "id": 7}', t.Say(text="Now", interrupt=True, id="7")),
    (t.VOLUME, b"0.5", t.Volume(volume=0.5)),
    (t.MUTE, b"anything", t.Mute(muted=True)),
    (t.SESSION_END, b"", t.SessionCommand(start=False)),
    (t.CONTROLLER, b"", None),
    (t.CONTROLLER, b'{"name": "Home Assistant"}', t.Controller(name="Home Assistant", timeout_s=5.0)),
    (t.INTENT_RESULT, b'{"id": "i1", "text": "Done", "targets": ["light.a"]}',
     t.IntentResult(id="i1", text="Done", targets=("light.a",))),
    (hermes.NLU_QUERY, b'{"input": "turn on the light", "siteId": "den"}',
     hermes.HermesQuery(input="turn on the light", id=None, session_id=None, site_id="den")),
])
def test_good_payloads(topic: str, payload: bytes, expected: Any) -> None:
    assert parse_inbound(topic, payload, max_bytes=LIMIT) == expected


def test_catalog_may_be_larger_than_other_payloads() -> None:
    entities = [{"entity_id": f"light.l{i}", "name": f"Lamp {i}"} for i in range(200)]
    payload = json.dumps(entities).encode()
    assert len(payload) > LIMIT
    update = parse_inbound(t.CATALOG, payload, max_bytes=LIMIT)
    assert isinstance(update, CatalogUpdate) and len(update.catalog) == 200


def test_outbox_keeps_order_and_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "outbox.db"
    box = Outbox(path, max_entries=100)
    seqs = [box.put("a/b", f"m{i}".encode()) for i in range(5)]
    box.ack(seqs[1])
    box.close()
    box = Outbox(path, max_entries=100)
    assert len(box) == 4
    assert [e.payload for e in box.after(0, 10)] == [b"m0", b"m2", b"m3", b"m4"]
    assert [e.payload for e in box.after(seqs[2], 10)] == [b"m3", b"m4"]
    box.ack(seqs[1])  # twice: nothing happens
    assert len(box) == 4
    box.close()


def test_outbox_full_drops_the_oldest(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    box = Outbox(tmp_path / "o.db", max_entries=3)
    for i in range(5):
        box.put("t", bytes([i]))
    assert len(box) == 3 and box.dropped == 2
    assert [e.payload for e in box.after(0, 10)] == [b"\x02", b"\x03", b"\x04"]
    assert "dropped the 1 oldest; 2 dropped in all" in caplog.text
    box.close()
