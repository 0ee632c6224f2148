"""Hermes (Rhasspy / Snips) payloads, so Home Assistant's ``snips`` integration and
Rhasspy clients work unchanged. The hub stays full duplex: it never turns listening off
while it speaks, as Rhasspy does.
"""

from __future__ import annotations

from typing import Any

from ..nlu import Intent


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "Custom"
    if isinstance(value, (int, float)):
        return "Number"
    return "Custom"


def slots(intent: Intent) -> list[dict[str, Any]]:
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


def intent_payload(intent: Intent, *, text: str, confidence: float, site_id: str,
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
