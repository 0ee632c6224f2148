"""Hermes (Rhasspy / Snips) topics and payloads.

So that Home Assistant's ``snips`` integration and Rhasspy clients work unchanged. The
hub stays full duplex: it never turns listening off while it speaks, as Rhasspy does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from ..protocol import BadPayload, IntentData, Message, id_field, text_field

TTS_SAY: Final = "hermes/tts/say"
END_SESSION: Final = "hermes/dialogueManager/endSession"
CONTINUE_SESSION: Final = "hermes/dialogueManager/continueSession"
NLU_QUERY: Final = "hermes/nlu/query"
INBOUND: Final = (TTS_SAY, END_SESSION, CONTINUE_SESSION, NLU_QUERY)
SESSION_STARTED: Final = "hermes/dialogueManager/sessionStarted"
SESSION_ENDED: Final = "hermes/dialogueManager/sessionEnded"
NOT_RECOGNIZED: Final = "hermes/nlu/intentNotRecognized"


AUDIO_FRAMES: Final = "hermes/audioServer/+/audioFrame"  # satellites' microphones (WAV chunks)
_AUDIO_FRAME_RE: Final = re.compile(r"^hermes/audioServer/([A-Za-z0-9_-]{1,64})/audioFrame$")


def audio_frame_site(topic: str) -> str | None:
    """The site of a ``hermes/audioServer/<siteId>/audioFrame`` topic, else None."""
    match = _AUDIO_FRAME_RE.match(topic)
    return match.group(1) if match else None


def play_bytes_topic(site: str, request_id: str) -> str:
    """Where a site's speaker audio goes (a WAV)."""
    return f"hermes/audioServer/{site}/playBytes/{request_id}"


def intent_topic(name: str) -> str:
    """The Hermes topic of one intent."""
    return f"hermes/intent/{name}"


# -- in ---------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HermesSay(Message):
    """``hermes/tts/say``: spoken when ``siteId`` is absent or this hub's site."""

    text: str = text_field()
    site_id: str | None = id_field(None, key="siteId")
    id: str | None = id_field(None)
    session_id: str | None = id_field(None, key="sessionId")


@dataclass(frozen=True, kw_only=True)
class HermesSession(Message):
    """``hermes/dialogueManager/endSession`` and ``continueSession``."""

    session_id: str = id_field(key="sessionId")
    text: str | None = text_field(None)
    end: bool = False  # from the topic


@dataclass(frozen=True, kw_only=True)
class HermesQuery(Message):
    """``hermes/nlu/query``: recognise text, answer on ``hermes/intent/...``."""

    input: str = text_field()
    id: str | None = id_field(None)
    session_id: str | None = id_field(None, key="sessionId")
    site_id: str | None = id_field(None, key="siteId")


HermesCommand = HermesSay | HermesSession | HermesQuery


def parse(topic: str, payload: bytes, *, max_bytes: int) -> HermesCommand:
    """Validate a payload on an inbound Hermes topic."""
    if len(payload) > max_bytes:
        raise BadPayload(f"{len(payload)} bytes is larger than the limit of {max_bytes}")
    if topic == TTS_SAY:
        return HermesSay.from_json(payload)
    if topic in (END_SESSION, CONTINUE_SESSION):
        session = HermesSession.from_json(payload)
        return HermesSession(session_id=session.session_id, text=session.text, end=topic == END_SESSION)
    if topic == NLU_QUERY:
        return HermesQuery.from_json(payload)
    raise BadPayload(f"unknown Hermes topic {topic!r}")


# -- out --------------------------------------------------------------------------------------
def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "Custom"
    if isinstance(value, (int, float)):
        return "Number"
    return "Custom"


def slots(intent: IntentData) -> list[dict[str, Any]]:
    """Hermes slots: ``slotName``, ``rawValue``, ``value.kind``, ``value.value``, ``entity``."""
    out = []
    for name, value in intent.slots.items():
        values = value if isinstance(value, list) else [value]
        for v in values:
            out.append({
                "entity": name,
                "slotName": name,
                "rawValue": str(v),
                "value": {"kind": _kind(v), "value": v},
                "confidence": 1.0,
            })
    return out


def intent_payload(intent: IntentData, *, text: str, confidence: float, site_id: str,
                   session_id: str, intent_id: str) -> dict[str, Any]:
    """The ``hermes/intent/<intentName>`` payload."""
    return {
        "input": text,
        "intent": {"intentName": intent.name, "confidenceScore": round(confidence, 3)},
        "slots": slots(intent),
        "siteId": site_id,
        "sessionId": session_id,
        "id": intent_id,
        "customData": None,
        "asrTokens": [],
        "asrConfidence": round(confidence, 3),
        "rawInput": text,
    }


def not_recognized(text: str, *, site_id: str, session_id: str | None,
                   request_id: str | None) -> dict[str, Any]:
    """The ``hermes/nlu/intentNotRecognized`` payload."""
    return {"input": text, "siteId": site_id, "sessionId": session_id, "id": request_id,
            "customData": None}


def session_started(*, site_id: str, session_id: str) -> dict[str, Any]:
    """``hermes/dialogueManager/sessionStarted``."""
    return {"sessionId": session_id, "siteId": site_id, "customData": None}


def session_ended(*, site_id: str, session_id: str, reason: str = "nominal") -> dict[str, Any]:
    """``hermes/dialogueManager/sessionEnded``."""
    return {"sessionId": session_id, "siteId": site_id, "customData": None,
            "termination": {"reason": reason}}
