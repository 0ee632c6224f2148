"""Inbound payloads, validated into small typed commands (see docs/protocol.md).

Every inbound payload goes through :func:`parse`; a bad one raises :class:`BadPayload`
whose message says what is wrong, and the caller logs, counts and drops it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Final

import voluptuous as vol

from ..catalog import Catalog, CatalogError
from ..controller import Controller
from . import topics as t

MAX_TEXT: Final = 2000  # characters of text to speak or to understand
CATALOG_SIZE_FACTOR: Final = 16  # the catalog may be this many times max_payload_bytes


class BadPayload(ValueError):
    """An inbound payload that cannot be used; str() is the reason."""


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise vol.Invalid("is not a string")
    value = value.strip()
    if not value:
        raise vol.Invalid("is empty")
    if len(value) > MAX_TEXT:
        raise vol.Invalid(f"is longer than {MAX_TEXT} characters")
    return value


def _id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise vol.Invalid("is not a string")
    value = str(value)
    if not 0 < len(value) <= 200:
        raise vol.Invalid("is not 1 to 200 characters")
    return value


def _volume(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise vol.Invalid("is not a number")
    if not 0.0 <= value <= 4.0:
        raise vol.Invalid(f"{value} is out of range (allowed 0 to 4)")
    return float(value)


def _opt_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise vol.Invalid("is not true or false")
    return value


@dataclass(frozen=True)
class Say:
    """``say``: speak text, now (interrupting) or after what is being said."""

    text: str
    interrupt: bool = False
    id: str | None = None


@dataclass(frozen=True)
class Ask:
    """``ask``: a text query handled as if spoken; the reply goes to ``ask/response``."""

    text: str
    id: str
    conversation_id: str | None = None
    language: str | None = None
    speak: bool = False  # also say the reply aloud


@dataclass(frozen=True)
class Mute:
    """``mute`` / ``unmute`` the microphone."""

    muted: bool


@dataclass(frozen=True)
class Session:
    """``session/start`` / ``session/end``, optionally saying text."""

    start: bool
    text: str | None = None


@dataclass(frozen=True)
class Volume:
    """``volume``: speaker gain 0..4 (1 = as synthesised)."""

    volume: float


@dataclass(frozen=True)
class CatalogUpdate:
    """``catalog``: the entity list that replaces the file catalog."""

    catalog: Catalog


@dataclass(frozen=True)
class IntentResult:
    """``intent/result``: the outcome of an intent executed elsewhere; the hub speaks it."""

    id: str
    text: str | None
    success: bool = True
    targets: tuple[str, ...] = ()


@dataclass(frozen=True)
class ControllerUpdate:
    """``controller`` (retained): who executes intents; None (an empty payload) = the hub."""

    controller: Controller | None


@dataclass(frozen=True)
class HermesSay:
    """``hermes/tts/say``."""

    text: str
    site_id: str | None
    id: str | None
    session_id: str | None


@dataclass(frozen=True)
class HermesSession:
    """``hermes/dialogueManager/endSession`` and ``continueSession``."""

    session_id: str
    text: str | None
    end: bool


@dataclass(frozen=True)
class HermesQuery:
    """``hermes/nlu/query``: recognise text, answer on ``hermes/intent/...``."""

    input: str
    id: str | None
    session_id: str | None
    site_id: str | None


Command = (Say | Ask | Mute | Session | Volume | CatalogUpdate | IntentResult | ControllerUpdate
           | HermesSay | HermesSession | HermesQuery)

_SAY = vol.Schema({vol.Required("text"): _text, vol.Optional("interrupt", default=False): _opt_bool,
                   vol.Optional("id"): _id}, extra=vol.ALLOW_EXTRA)
_ASK = vol.Schema({vol.Required("text"): _text, vol.Required("id"): _id,
                   vol.Optional("conversation_id"): vol.Any(None, _id),
                   vol.Optional("language"): vol.Any(None, vol.All(str, vol.Length(max=20))),
                   vol.Optional("speak", default=False): _opt_bool}, extra=vol.ALLOW_EXTRA)
_SESSION = vol.Schema({vol.Optional("text"): vol.Any(None, _text)}, extra=vol.ALLOW_EXTRA)
_VOLUME = vol.Schema({vol.Required("volume"): _volume}, extra=vol.ALLOW_EXTRA)
_RESULT = vol.Schema({vol.Required("id"): _id,
                      vol.Optional("text"): vol.Any(None, _text),
                      vol.Optional("success", default=True): _opt_bool,
                      vol.Optional("targets", default=list): [vol.All(str, vol.Length(max=255))]},
                     extra=vol.ALLOW_EXTRA)
_CONTROLLER = vol.Schema({vol.Required("name"): vol.All(_text, vol.Length(max=80)),
                         vol.Optional("timeout_s", default=5.0): vol.All(
                             vol.Coerce(float), vol.Range(min=0.1, max=60.0))}, extra=vol.ALLOW_EXTRA)
_HERMES_SAY = vol.Schema({vol.Required("text"): _text, vol.Optional("siteId"): vol.Any(None, _id),
                          vol.Optional("id"): vol.Any(None, _id),
                          vol.Optional("sessionId"): vol.Any(None, _id)}, extra=vol.ALLOW_EXTRA)
_HERMES_SESSION = vol.Schema({vol.Required("sessionId"): _id, vol.Optional("text"): vol.Any(None, _text)},
                             extra=vol.ALLOW_EXTRA)
_HERMES_QUERY = vol.Schema({vol.Required("input"): _text, vol.Optional("id"): vol.Any(None, _id),
                            vol.Optional("sessionId"): vol.Any(None, _id),
                            vol.Optional("siteId"): vol.Any(None, _id)}, extra=vol.ALLOW_EXTRA)


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadPayload("not UTF-8") from None
    except json.JSONDecodeError as err:
        raise BadPayload(f"not JSON ({err.msg} at character {err.pos})") from None


def _object(payload: bytes, *, bare: str | None = None, number: bool = False,
            empty_ok: bool = False) -> dict[str, Any]:
    """A JSON object; a payload that does not look like JSON becomes ``{bare: text or number}``."""
    stripped = payload.strip()
    if not stripped and empty_ok:
        return {}
    if bare is not None and stripped[:1] not in (b"{", b"["):
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError:
            raise BadPayload("not UTF-8") from None
        if not number:
            return {bare: text}
        try:
            return {bare: float(text)}
        except ValueError:
            raise BadPayload(f"{text[:40]!r} is not a number") from None
    data = _json(payload)
    if not isinstance(data, dict):
        raise BadPayload(f"not a JSON object (got {type(data).__name__})")
    return data


def _check(schema: vol.Schema, data: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(schema(data))
    except vol.MultipleInvalid as err:
        first = err.errors[0]
        where = ".".join(str(p) for p in first.path) or "payload"
        raise BadPayload(f"{where}: {first.msg}") from None
    except vol.Invalid as err:
        raise BadPayload(str(err)) from None


def parse(command: str, payload: bytes, *, max_bytes: int) -> Command:
    """Validate an inbound payload on a command topic (relative name or Hermes topic)."""
    limit = max_bytes * (CATALOG_SIZE_FACTOR if command == t.CATALOG else 1)
    if len(payload) > limit:
        raise BadPayload(f"{len(payload)} bytes is larger than the limit of {limit}")
    if command == t.SAY:
        d = _check(_SAY, _object(payload, bare="text"))
        return Say(text=d["text"], interrupt=d["interrupt"], id=d.get("id"))
    if command == t.ASK:
        d = _check(_ASK, _object(payload))
        return Ask(text=d["text"], id=d["id"], conversation_id=d.get("conversation_id"),
                   language=d.get("language"), speak=d["speak"])
    if command in (t.MUTE, t.UNMUTE):
        return Mute(muted=command == t.MUTE)
    if command in (t.SESSION_START, t.SESSION_END):
        d = _check(_SESSION, _object(payload, empty_ok=True))
        return Session(start=command == t.SESSION_START, text=d.get("text"))
    if command == t.VOLUME:
        d = _check(_VOLUME, _object(payload, bare="volume", number=True))
        return Volume(volume=d["volume"])
    if command == t.CATALOG:
        data = _json(payload)
        if isinstance(data, list):
            data = {"entities": data}
        try:
            return CatalogUpdate(catalog=Catalog.from_dict(data))
        except CatalogError as err:
            raise BadPayload(str(err)) from None
    if command == t.INTENT_RESULT:
        d = _check(_RESULT, _object(payload))
        return IntentResult(id=d["id"], text=d.get("text"), success=d["success"],
                            targets=tuple(d["targets"]))
    if command == t.CONTROLLER:
        if not payload.strip():
            return ControllerUpdate(controller=None)
        d = _check(_CONTROLLER, _object(payload))
        return ControllerUpdate(controller=Controller(name=d["name"], timeout_s=d["timeout_s"]))
    if command == t.HERMES_TTS_SAY:
        d = _check(_HERMES_SAY, _object(payload))
        return HermesSay(text=d["text"], site_id=d.get("siteId"), id=d.get("id"),
                         session_id=d.get("sessionId"))
    if command in (t.HERMES_END_SESSION, t.HERMES_CONTINUE_SESSION):
        d = _check(_HERMES_SESSION, _object(payload))
        return HermesSession(session_id=d["sessionId"], text=d.get("text"),
                             end=command == t.HERMES_END_SESSION)
    if command == t.HERMES_NLU_QUERY:
        d = _check(_HERMES_QUERY, _object(payload))
        return HermesQuery(input=d["input"], id=d.get("id"), session_id=d.get("sessionId"),
                           site_id=d.get("siteId"))
    raise BadPayload(f"unknown command {command!r}")


@dataclass
class Rejections:
    """Counts of dropped inbound payloads, by topic."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, topic: str) -> None:
        """Count one."""
        self.counts[topic] = self.counts.get(topic, 0) + 1

    @property
    def total(self) -> int:
        """All dropped payloads."""
        return sum(self.counts.values())
