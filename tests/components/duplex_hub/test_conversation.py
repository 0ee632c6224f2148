"""The conversation agent through ``conversation.async_converse``, answered by a real hub process."""

from __future__ import annotations

import pytest
from homeassistant.components import conversation
from homeassistant.components.conversation.agent_manager import async_get_agent
from homeassistant.components.homeassistant.exposed_entities import async_expose_entity
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import intent

from custom_components.duplex_hub import hub as hub_module
from custom_components.duplex_hub.const import CONF_ALLOWED_INTENTS

from ..conftest import BASE, HubProcess, collect, hub_entry, publish, wait_until

AGENT = "conversation.test_hub"


async def _live_hub(hass: HomeAssistant, hub_process: HubProcess, *, entities: int = 1,
                    **options: object) -> object:
    applied = await collect(hass, f"{BASE}/event/catalog_applied")
    entry = hub_entry(hass, **options)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    hub_process.start()
    await wait_until(hass, lambda: getattr(getattr(entry, "runtime_data", None), "available", False), 120,
                     "the hub online")
    await wait_until(hass, lambda: any(e.get("entities") == entities for e in applied.json()), 60,
                     "Home Assistant's catalog applied by the hub")
    await hass.async_block_till_done()
    return entry.runtime_data


async def _converse(hass: HomeAssistant, text: str) -> conversation.ConversationResult:
    return await conversation.async_converse(hass, text=text, conversation_id=None, context=Context(),
                                             language="en", agent_id=AGENT)


async def test_agent_turns_on_an_exposed_light_only(hass: HomeAssistant, home: dict[str, str],
                                                    hub_process: HubProcess) -> None:
    client = await _live_hub(hass, hub_process)
    result = await _converse(hass, "turn on the kitchen light")
    assert result.response.response_type is intent.IntentResponseType.ACTION_DONE, result.response.as_dict()
    assert hass.states.get(home["kitchen"]).state == "on"
    assert result.response.speech["plain"]["speech"]  # the hub's own reply
    assert client.counts["asks"] == 1
    agent = async_get_agent(hass, AGENT)
    assert agent is not None and agent.supported_languages == ["en"]  # the hub answers in English only

    # the porch light is not exposed: it is not switched, whatever the hub made of the words
    await _converse(hass, "turn on the porch light")
    assert hass.states.get(home["porch"]).state == "off"

    # a question: answered, nothing changes
    result = await _converse(hass, "is the kitchen light on")
    assert result.response.response_type is not intent.IntentResponseType.ERROR, result.response.as_dict()
    assert hass.states.get(home["kitchen"]).state == "on"


async def test_allowed_intents_and_prefer_local(hass: HomeAssistant, home: dict[str, str],
                                                hub_process: HubProcess) -> None:
    client = await _live_hub(hass, hub_process, **{CONF_ALLOWED_INTENTS: ["HassGetState"]})
    result = await _converse(hass, "turn on the kitchen light")
    assert result.response.error_code is intent.IntentResponseErrorCode.FAILED_TO_HANDLE
    assert hass.states.get(home["kitchen"]).state == "off"
    client.prefer_local = True  # Home Assistant's own sentences first: no ask is sent
    asks = client.counts["asks"]
    result = await _converse(hass, "turn on the kitchen light")
    assert hass.states.get(home["kitchen"]).state == "on" and client.counts["asks"] == asks


async def test_offline_or_silent_hub_gives_an_error_response(hass: HomeAssistant, home: dict[str, str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    result = await _converse(hass, "turn on the kitchen light")  # no hub at all
    assert result.response.error_code is intent.IntentResponseErrorCode.UNKNOWN
    assert "offline" in result.response.speech["plain"]["speech"]
    # online (a retained availability), but nobody answers the ask
    monkeypatch.setattr(hub_module, "ASK_TIMEOUT_S", 1.0)
    await publish(hass, f"{BASE}/availability", "online", retain=True)
    await wait_until(hass, lambda: entry.runtime_data.available, 10, "online")
    result = await _converse(hass, "turn on the kitchen light")
    assert result.response.error_code is intent.IntentResponseErrorCode.UNKNOWN
    assert "did not answer" in result.response.speech["plain"]["speech"]
    assert hass.states.get(home["kitchen"]).state == "off"
    await publish(hass, f"{BASE}/availability", "", retain=True)


async def test_a_question_from_the_hub_continues_the_conversation(hass: HomeAssistant, home: dict[str, str],
                                                                 hub_process: HubProcess) -> None:
    """ "Which room?" keeps the conversation open; the answer lands in the same dialogue."""
    async_expose_entity(hass, "conversation", home["porch"], True)  # two rooms with a light
    await _live_hub(hass, hub_process, entities=2)
    first = await conversation.async_converse(hass, text="turn on the lights", conversation_id=None,
                                              context=Context(), language="en", agent_id=AGENT)
    assert first.continue_conversation, first.response.as_dict()
    assert "room" in first.response.speech["plain"]["speech"].lower()
    assert hass.states.get(home["kitchen"]).state == "off" and hass.states.get(home["porch"]).state == "off"
    second = await conversation.async_converse(hass, text="the porch", conversation_id=first.conversation_id,
                                               context=Context(), language="en", agent_id=AGENT)
    assert not second.continue_conversation, second.response.as_dict()
    assert second.response.response_type is intent.IntentResponseType.ACTION_DONE, second.response.as_dict()
    assert hass.states.get(home["porch"]).state == "on" and hass.states.get(home["kitchen"]).state == "off"
