"""The wire vocabulary: one protocol module, vendored verbatim into the Home Assistant component."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hub_runtime import protocol as p

ROOT = Path(__file__).resolve().parents[2]


def test_the_home_assistant_copy_is_the_same_module() -> None:
    ours = (ROOT / "hub_runtime" / "protocol.py").read_bytes()
    vendored = (ROOT / "custom_components" / "duplex_hub" / "protocol.py").read_bytes()
    assert vendored == ours, ("custom_components/duplex_hub/protocol.py differs from hub_runtime/protocol.py: "
                              "copy it again (cp hub_runtime/protocol.py custom_components/duplex_hub/)")


def test_the_module_needs_only_the_standard_library() -> None:
    source = (ROOT / "hub_runtime" / "protocol.py").read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines()
               if line.startswith(("import ", "from ")) and not line.startswith("from __future__")}
    assert imports <= {"dataclasses", "json", "math", "re", "types", "typing"}, imports


@pytest.mark.parametrize("message", [
    p.Discovery(id="kitchen", name="Kitchen", version="1", base_topic="duplex_hub/kitchen", site="k",
                availability_topic="duplex_hub/kitchen/availability", capabilities=("say",)),
    p.Status(state="thinking", muted=True, volume=0.5, site="k"),
    p.IntentMessage(id="i1", site="k", text="turn on the light",
                    intent=p.IntentData(name="HassTurnOn", slots={"name": "Light"}, targets=("light.a",)),
                    confidence=0.9, source="grammar", request_id=None,
                    timestamps=p.Timestamps(time="2026-12-03T00:00:00+00:00", intent_ms=5)),
    p.AskResponse(id="q", conversation_id="c", site="k", text="hi", intent=None, source=None,
                  response="Sorry", success=False, expects_reply=True),
    p.Say(text="Dinner", interrupt=True, id="s"),
    p.Ask(text="what time is it", id="q1", conversation_id=None, language="en"),
    p.IntentResult(id="i1", text=None, success=False, targets=("light.a",)),
    p.Controller(name="Home Assistant", timeout_s=2.5),
    p.CatalogMessage(entities=[{"entity_id": "light.a", "name": "A"}]),
])
def test_every_message_round_trips_through_json(message: p.Message) -> None:
    assert type(message).from_json(message.to_json()) == message


def test_events_round_trip_and_dispatch_by_type() -> None:
    events = [p.SpeechStart(onset_ms=10, t_ms=40), p.Transcript(text="hi", tier="open", confidence=0.5, t_ms=9),
              p.IntentRecognized(id="x", name="HassTurnOn", targets=("light.a",), t_ms=3),
              p.TtsCancelled(played_ms=120), p.StateChanged(state="idle", site="k"),
              p.CatalogApplied(entities=3, version=1, rebuilt=True)]
    for event in events:
        data = json.loads(event.to_json())
        assert list(data)[:2] == ["t_ms", "type"]
        assert p.event_from_dict(data) == event
    with pytest.raises(p.BadPayload, match="not a dialogue event"):
        p.event_from_dict({"type": "nonsense"})


@pytest.mark.parametrize(("kind", "payload", "reason"), [
    (p.Status, b'{"state": "dancing"}', "state: 'dancing' is not one of"),
    (p.Status, b'{"state": "idle", "volume": 9}', "volume: 9 is out of range"),
    (p.IntentMessage, b'{"id": "x"}', "intent: is required"),
    (p.IntentMessage, b'{"id": "x", "intent": {"name": 3}}', "intent.name: is not a string"),
    (p.Ask, b'{"text": "  ", "id": "q"}', "text: is empty"),
    (p.Discovery, b'{"id": "a b"}', "id: 'a b' is not allowed"),
    (p.IntentResult, b'{"id": "i", "targets": "light.a"}', "targets: is not a list"),
])
def test_bad_payloads_name_the_field(kind: type[p.Message], payload: bytes, reason: str) -> None:
    with pytest.raises(p.BadPayload, match=reason):
        kind.from_json(payload)


def test_topics() -> None:
    t = p.Topics.for_hub("kitchen")
    assert t.base == "duplex_hub/kitchen" and t.intent == "duplex_hub/kitchen/intent"
    assert t.command("duplex_hub/kitchen/session/start") == p.SESSION_START
    assert t.command("duplex_hub/kitchen/intent") is None and t.command("other/say") is None
    assert p.discovery_topic("kitchen") == "duplex_hub/discovery/kitchen"
