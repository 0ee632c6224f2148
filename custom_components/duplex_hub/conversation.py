"""The hub as a conversation agent: Assist text goes to the hub's ``ask`` topic.

The hub recognises the turn (its grammar, then its LLM) and answers on ``ask/response``;
an intent in the answer is executed here through Home Assistant's intent machinery
(``assistant="conversation"``: exposed entities only). The reply is the hub's, or Home
Assistant's where the hub has none; a hub that is offline or late, or an intent that
fails, gives an error response, never an exception.
"""

from __future__ import annotations

import logging
from typing import Literal

from homeassistant.components import conversation
from homeassistant.core import HomeAssistant
from homeassistant.helpers import intent
from homeassistant.helpers.entity_platform import AddEntitiesCallback

from . import DuplexHubConfigEntry
from .entity import DuplexHubEntity
from .hub import HubClient
from .intents import async_execute, error_response, failed, speech_of
from .protocol import TIMER_INTENTS

_LOGGER = logging.getLogger(__name__)
PARALLEL_UPDATES = 0


async def async_setup_entry(hass: HomeAssistant, entry: DuplexHubConfigEntry,
                            async_add_entities: AddEntitiesCallback) -> None:
    """The agent of the entry's hub."""
    async_add_entities([DuplexHubAgent(entry.runtime_data)])


class DuplexHubAgent(DuplexHubEntity, conversation.ConversationEntity):
    """A conversation agent answered by one hub."""

    _attr_name = None  # the device's name
    _attr_supported_features = conversation.ConversationEntityFeature.CONTROL

    def __init__(self, hub: HubClient) -> None:
        """The agent of this hub."""
        super().__init__(hub, "agent")

    @property
    def available(self) -> bool:
        """Always offered; an offline hub gives an error response."""
        return True

    @property
    def supported_languages(self) -> list[str] | Literal["*"]:
        """The hub's language (English): it understands and answers in no other."""
        return [self.hub.info.language if self.hub.info and self.hub.info.language else "en"]

    async def _async_handle_message(self, user_input: conversation.ConversationInput,
                                    chat_log: conversation.ChatLog) -> conversation.ConversationResult:
        response, asks = await self._respond(user_input, chat_log.conversation_id)
        speech = speech_of(response)
        if speech:
            chat_log.async_add_assistant_content_without_tools(
                conversation.AssistantContent(agent_id=user_input.agent_id, content=speech))
        # the hub asked something ("Which room?"): a satellite keeps listening for the answer
        return conversation.ConversationResult(response=response, conversation_id=chat_log.conversation_id,
                                               continue_conversation=asks)

    async def _respond(self, user_input: conversation.ConversationInput,
                       conversation_id: str) -> tuple[intent.IntentResponse, bool]:
        """The response, and whether the hub asked the user something."""
        hub, text = self.hub, user_input.text
        language = user_input.language or hub.language
        if hub.prefer_local and (local := await self._home_assistant(user_input)) is not None:
            return local, False
        try:
            answer = await hub.async_ask(text, conversation_id=conversation_id, language=language)
        except TimeoutError:
            return error_response(language, intent.IntentResponseErrorCode.UNKNOWN,
                                  f"{hub.name} did not answer in time"), False
        except ConnectionError:
            return error_response(language, intent.IntentResponseErrorCode.UNKNOWN,
                                  f"{hub.name} is offline"), False
        said = answer.response or None
        hub_intent = answer.intent
        if hub_intent is None or hub_intent.name in TIMER_INTENTS:  # nothing for Home Assistant to do
            response = intent.IntentResponse(language=language)
            response.async_set_speech(said or "Sorry, I couldn't understand that")
            return response, answer.expects_reply
        response = await async_execute(self.hass, hub_intent, text=text, language=language,
                                       allowed=hub.allowed, context=user_input.context,
                                       device_id=user_input.device_id, agent_id=self.entity_id,
                                       satellite_id=getattr(user_input, "satellite_id", None))
        if not failed(response) and said:
            response.async_set_speech(said)
        elif not failed(response) and not speech_of(response):
            response.async_set_speech("Done")
        return response, answer.expects_reply

    async def _home_assistant(self, user_input: conversation.ConversationInput) -> intent.IntentResponse | None:
        """Home Assistant's own sentence matching, when it matches (``prefer_local``)."""
        result = await conversation.async_converse(
            self.hass, text=user_input.text, conversation_id=None, context=user_input.context,
            language=user_input.language, agent_id=conversation.HOME_ASSISTANT_AGENT,
            device_id=user_input.device_id)
        if (failed(result.response)
                and result.response.error_code is intent.IntentResponseErrorCode.NO_INTENT_MATCH):
            return None
        return result.response
