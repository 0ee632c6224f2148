"""The hub's intents carried out through Home Assistant's own intent machinery.

``intent.async_handle(..., assistant="conversation")`` does the name/area matching and
limits every intent to the entities exposed to Assist. Nothing here raises: a failure
becomes an error ``IntentResponse`` with a sentence the hub can speak.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable
from typing import Any

from homeassistant.components import conversation
from homeassistant.core import Context, HomeAssistant
from homeassistant.helpers import intent

from . import protocol as p
from .const import DOMAIN

_LOGGER = logging.getLogger(__name__)
_HANDLE_PARAMETERS = frozenset(inspect.signature(intent.async_handle).parameters)


def _no_match_speech(slots: dict[str, Any]) -> str:
    name, area = slots.get("name"), slots.get("area")
    if name and area:
        return f"Sorry, I am not aware of any device called {name} in the {area}"
    if name:
        return f"Sorry, I am not aware of any device called {name}"
    if area:
        return f"Sorry, I am not aware of any such device in the {area}"
    return "Sorry, I couldn't find that device"


def error_response(language: str, code: intent.IntentResponseErrorCode, speech: str) -> intent.IntentResponse:
    """An error response whose speech is ``speech``."""
    response = intent.IntentResponse(language=language)
    response.async_set_error(code, speech)
    return response


async def async_execute(
    hass: HomeAssistant,
    hub_intent: p.IntentData,
    *,
    text: str,
    language: str,
    allowed: Iterable[str],
    context: Context | None = None,
    device_id: str | None = None,
    agent_id: str | None = None,
    satellite_id: str | None = None,
) -> intent.IntentResponse:
    """Carry out one hub intent; never raises."""
    name = hub_intent.name
    raw = hub_intent.slots
    slots = {k: {"value": v} for k, v in raw.items()}
    if name not in set(allowed):
        _LOGGER.info("intent %s is not allowed for this hub", name)
        return error_response(language, intent.IntentResponseErrorCode.FAILED_TO_HANDLE,
                              "Sorry, I am not allowed to do that")
    extra: dict[str, Any] = {}
    if satellite_id is not None and "satellite_id" in _HANDLE_PARAMETERS:  # Home Assistant 2025.7 and later
        extra["satellite_id"] = satellite_id
    try:
        return await intent.async_handle(
            hass,
            platform=DOMAIN,
            intent_type=name,
            slots=slots,
            text_input=text,
            context=context or Context(),
            language=language,
            assistant=conversation.DOMAIN,
            device_id=device_id,
            conversation_agent_id=agent_id,
            **extra,
        )
    except intent.MatchFailedError:
        return error_response(language, intent.IntentResponseErrorCode.NO_VALID_TARGETS,
                              _no_match_speech(raw))
    except intent.UnknownIntent:
        return error_response(language, intent.IntentResponseErrorCode.NO_INTENT_MATCH,
                              "Sorry, I can't do that yet")
    except intent.IntentHandleError as err:
        return error_response(language, intent.IntentResponseErrorCode.FAILED_TO_HANDLE,
                              str(err) or "Sorry, that did not work")
    except intent.IntentError as err:  # invalid slots, an unexpected handler error
        _LOGGER.warning("intent %s failed: %s", name, err)
        return error_response(language, intent.IntentResponseErrorCode.FAILED_TO_HANDLE,
                              "Sorry, that did not work")


def speech_of(response: intent.IntentResponse) -> str | None:
    """The plain speech of a response, if it has one."""
    speech = response.speech.get("plain", {}).get("speech")
    return str(speech) if speech else None


def failed(response: intent.IntentResponse) -> bool:
    """Whether the response is an error."""
    return response.response_type == intent.IntentResponseType.ERROR


def targets_of(response: intent.IntentResponse) -> list[str]:
    """The entity ids an intent acted on or matched."""
    out = [t.id for t in response.success_results
           if t.type == intent.IntentResponseTargetType.ENTITY and t.id]
    out += [s.entity_id for s in response.matched_states if s.entity_id not in out]
    return out
