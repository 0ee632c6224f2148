"""The Duplex Hub MQTT protocol: every topic and every payload, as small typed messages.

One module for both ends, in the style of Wyoming's events. The hub publishes and parses
with it; the Home Assistant integration ships alone (HACS), so it carries a verbatim copy
(``custom_components/duplex_hub/protocol.py``) and a test fails when the two differ. It
uses the standard library only. ``docs/protocol.md`` describes the same messages for
people.

Every message is a frozen dataclass. ``to_dict``/``to_json`` give its payload;
``from_dict``/``from_json`` validate one and raise :class:`BadPayload`, whose message
names the field and the reason (``volume: 99 is out of range (0 to 4)``). Unknown fields
are ignored, so an older hub and a newer controller still understand each other.

Dialogue events (``<base>/event/<type>`` and the lines of ``hub-runtime run --events``)
are :class:`Event` subclasses, one per ``type``; :func:`event_from_dict` reads any of them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self

PROTOCOL_VERSION: Final = 1
ROOT: Final = "duplex_hub"
DISCOVERY_TOPICS: Final = f"{ROOT}/discovery/#"  # what a controller subscribes to
ONLINE: Final = "online"  # <base>/availability (plain text, retained; OFFLINE is the last will)
OFFLINE: Final = "offline"
MAX_TEXT: Final = 2000  # characters of text to speak or to understand
CATALOG_SIZE_FACTOR: Final = 16  # a catalog may be this many times the payload limit

# The intents a hub recognises and publishes: Home Assistant's (its English templates, its
# names), which a controller executes with its own handlers. Timers are the hub's own: it
# keeps them itself, also under a controller, and only reports them.
TIMER_INTENTS: Final = (
    "HassStartTimer", "HassCancelTimer", "HassCancelAllTimers", "HassIncreaseTimer", "HassDecreaseTimer",
    "HassPauseTimer", "HassUnpauseTimer", "HassTimerStatus",
)
SUPPORTED_INTENTS: Final = (
    "HassTurnOn", "HassTurnOff", "HassToggle", "HassLightSet", "HassGetState",
    "HassClimateGetTemperature", "HassClimateSetTemperature", "HassClimateSetFanMode", "HassGetWeather",
    "HassGetCurrentDate", "HassGetCurrentTime", "HassSetPosition", "HassFanSetSpeed",
    "HassMediaPause", "HassMediaUnpause", "HassMediaNext", "HassMediaPrevious", "HassSetVolume",
    "HassSetVolumeRelative", "HassMediaPlayerMute", "HassMediaPlayerUnmute", "HassMediaSearchAndPlay",
    *TIMER_INTENTS,
    "HassListAddItem", "HassListCompleteItem", "HassListRemoveItem", "HassShoppingListAddItem",
    "HassShoppingListCompleteItem", "HassVacuumStart", "HassVacuumReturnToBase", "HassVacuumCleanArea",
    "HassLawnMowerStartMowing", "HassLawnMowerDock", "HassBroadcast", "HassNevermind", "HassRespond",
)
# Intents that only answer (never change the home); the rest change state or make noise.
READ_ONLY_INTENTS: Final = ("HassGetState", "HassClimateGetTemperature", "HassGetWeather", "HassGetCurrentDate",
                            "HassGetCurrentTime", "HassTimerStatus", "HassNevermind", "HassRespond")
# What the hub is doing, as published on <base>/state: the user is speaking (listening),
# a turn ended and the reply is being made (thinking), the hub plays its reply (speaking).
DIALOGUE_STATES: Final = ("idle", "listening", "thinking", "speaking")


Payload = bytes | bytearray | str  # a raw MQTT payload


class BadPayload(ValueError):
    """A payload that cannot be used; str() names the field and the reason."""


# -- field rules -------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """How one field is checked (beyond its type)."""

    min_len: int = 0  # strings and lists
    max_len: int | None = None
    lo: float | None = None  # numbers
    hi: float | None = None
    choices: tuple[str, ...] | None = None
    pattern: str | None = None
    strip: bool = False  # strings: surrounding white space removed before the checks
    key: str | None = None  # the JSON key when it differs from the field name
    omit_none: bool = False  # leave the key out of the payload when the value is None
    number_ok: bool = False  # strings: a whole number is taken as its digits


def rule_field(default: Any = dataclasses.MISSING, **rule: Any) -> Any:
    """A dataclass field checked by a :class:`Rule`."""
    kwargs: dict[str, Any] = {"metadata": {"rule": Rule(**rule)}}
    if default is not dataclasses.MISSING:
        kwargs["default"] = default
    return field(**kwargs)


def text_field(default: Any = dataclasses.MISSING, **rule: Any) -> Any:
    """Text to say or understand: stripped, not empty, at most MAX_TEXT characters."""
    return rule_field(default, **{"strip": True, "min_len": 1, "max_len": MAX_TEXT, **rule})


def id_field(default: Any = dataclasses.MISSING, **rule: Any) -> Any:
    """An identifier: 1 to 200 characters (a number is taken as its digits)."""
    return rule_field(default, **{"min_len": 1, "max_len": 200, "number_ok": True, **rule})


def number_field(lo: float, hi: float, default: Any = dataclasses.MISSING, **rule: Any) -> Any:
    """A number within [lo, hi]."""
    return rule_field(default, lo=lo, hi=hi, **rule)


def _fmt(value: float) -> str:
    return f"{value:g}"


def _check(value: Any, hint: Any, rule: Rule, path: str) -> Any:
    """``value`` converted to ``hint`` (a small set of types) under ``rule``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _check(value, inner, rule, path)
    if hint is Any:
        return value
    if hint is str:
        if rule.number_ok and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise BadPayload(f"{path}: is not a string")
        if rule.strip:
            value = value.strip()
        if len(value) < rule.min_len:
            raise BadPayload(f"{path}: is empty" if rule.min_len == 1 else f"{path}: is too short")
        if rule.max_len is not None and len(value) > rule.max_len:
            raise BadPayload(f"{path}: is longer than {rule.max_len} characters")
        if rule.choices is not None and value not in rule.choices:
            raise BadPayload(f"{path}: {value!r} is not one of {', '.join(rule.choices)}")
        if rule.pattern is not None and not re.fullmatch(rule.pattern, value):
            raise BadPayload(f"{path}: {value!r} is not allowed")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise BadPayload(f"{path}: is not true or false")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BadPayload(f"{path}: is not a number")
        if hint is int and not float(value).is_integer():
            raise BadPayload(f"{path}: is not a whole number")
        value = int(value) if hint is int else float(value)
        if (rule.lo is not None and value < rule.lo) or (rule.hi is not None and value > rule.hi):
            raise BadPayload(f"{path}: {_fmt(value)} is out of range ({_fmt(rule.lo or 0)} to {_fmt(rule.hi or 0)})")
        return value
    if origin is dict or hint is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise BadPayload(f"{path}: is not an object")
        return dict(value)
    if origin in (tuple, list):
        if not isinstance(value, list | tuple):
            raise BadPayload(f"{path}: is not a list")
        if rule.max_len is not None and len(value) > rule.max_len:
            raise BadPayload(f"{path}: has more than {rule.max_len} items")
        item = Rule(max_len=255) if args and args[0] is str else Rule()
        items = [_check(v, args[0] if args else Any, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if isinstance(hint, type) and issubclass(hint, Message):
        return hint.from_dict(value, path=path)
    raise TypeError(f"{path}: unsupported field type {hint!r}")  # a bug in this module


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Message:
    """A payload: a frozen dataclass with JSON in and out."""

    BARE: ClassVar[str | None] = None  # a payload that is not JSON fills this (text) field
    BARE_NUMBER: ClassVar[bool] = False  # ... as a number
    EMPTY_OK: ClassVar[bool] = False  # an empty payload is the message with its defaults

    @classmethod
    def _hints(cls) -> dict[str, Any]:
        hints: dict[str, Any] | None = cls.__dict__.get("_hints_cache")
        if hints is None:
            hints = typing.get_type_hints(cls)
            setattr(cls, "_hints_cache", hints)  # noqa: B010 (a class attribute, not a field)
        return hints

    def to_dict(self) -> dict[str, Any]:
        """The payload as a JSON-ready dict."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            rule: Rule = f.metadata.get("rule", Rule())
            value = getattr(self, f.name)
            if value is None and rule.omit_none:
                continue
            out[rule.key or f.name] = _plain(value)
        return out

    def to_json(self) -> str:
        """The payload as compact JSON."""
        return dumps(self.to_dict()).decode()

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "") -> Self:
        """Validate a parsed payload; BadPayload names the first wrong field."""
        if not isinstance(data, dict):
            raise BadPayload(f"{path or 'payload'}: not a JSON object (got {type(data).__name__})")
        hints = cls._hints()
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            rule = f.metadata.get("rule", Rule())
            key = rule.key or f.name
            where = f"{path}.{key}" if path else key
            if key not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise BadPayload(f"{where}: is required")
                continue
            kwargs[f.name] = _check(data[key], hints[f.name], rule, where)
        return cls(**kwargs)

    @classmethod
    def from_json(cls, payload: Payload) -> Self:
        """Validate a raw payload (bytes or text)."""
        raw = payload.encode() if isinstance(payload, str) else bytes(payload)
        stripped = raw.strip()
        if not stripped and cls.EMPTY_OK:
            return cls.from_dict({})
        if cls.BARE is not None and stripped[:1] not in (b"{", b"["):
            text = _utf8(stripped)
            if not cls.BARE_NUMBER:
                return cls.from_dict({cls.BARE: text})
            try:
                number = float(text)
            except ValueError:
                raise BadPayload(f"{text[:40]!r} is not a number") from None
            return cls.from_dict({cls.BARE: number})
        return cls.from_dict(parse_json(raw))


def dumps(data: Any) -> bytes:
    """Compact UTF-8 JSON (values JSON does not know become strings)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadPayload("not UTF-8") from None


def parse_json(raw: Payload) -> Any:
    """JSON, or BadPayload saying why not."""
    text = raw if isinstance(raw, str) else _utf8(bytes(raw))
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadPayload(f"not JSON ({err.msg} at character {err.pos})") from None


# -- topics ---------------------------------------------------------------------------------
SAY: Final = "say"
ASK: Final = "ask"
MUTE: Final = "mute"
UNMUTE: Final = "unmute"
SESSION_START: Final = "session/start"
SESSION_END: Final = "session/end"
VOLUME: Final = "volume"
CATALOG: Final = "catalog"
CATALOG_STATES: Final = "catalog/states"
INTENT_RESULT: Final = "intent/result"
CONTROLLER: Final = "controller"
COMMANDS: Final = (SAY, ASK, MUTE, UNMUTE, SESSION_START, SESSION_END, VOLUME, CATALOG, CATALOG_STATES,
                   INTENT_RESULT, CONTROLLER)


BROADCAST_TOPIC: Final = f"{ROOT}/broadcast"  # a message for every hub but the one that heard it


def discovery_topic(hub_id: str) -> str:
    """The retained announcement of one hub."""
    return f"{ROOT}/discovery/{hub_id}"


@dataclass(frozen=True)
class Topics:
    """The topics of one hub under its base topic (``duplex_hub/<hub_id>`` by default)."""

    base: str

    @classmethod
    def for_hub(cls, hub_id: str) -> Topics:
        """The default base topic of a hub id."""
        return cls(f"{ROOT}/{hub_id}")

    def __call__(self, relative: str) -> str:
        """A topic under the base."""
        return f"{self.base}/{relative}"

    @property
    def availability(self) -> str:
        """Retained ``online`` / ``offline`` (the last will)."""
        return self("availability")

    @property
    def state(self) -> str:
        """Retained :class:`Status`."""
        return self("state")

    @property
    def intent(self) -> str:
        """Every recognised intent, :class:`IntentMessage` (QoS 1, through the outbox)."""
        return self("intent")

    @property
    def ask_response(self) -> str:
        """:class:`AskResponse`, the replies to ``ask``."""
        return self("ask/response")

    @property
    def events(self) -> str:
        """Every dialogue event (a wildcard)."""
        return self("event/+")

    def event(self, kind: str) -> str:
        """One kind of dialogue event."""
        return self(f"event/{kind}")

    def command(self, topic: str) -> str | None:
        """The relative command name of an inbound topic under this base, else None."""
        prefix = self.base + "/"
        if topic.startswith(prefix) and topic[len(prefix):] in COMMANDS:
            return topic[len(prefix):]
        return None


# -- out: what a hub publishes ---------------------------------------------------------------
CAPABILITIES: Final = ("intents", "events", "say", "ask", "mute", "session", "volume", "catalog",
                       "intent_result", "controller")


@dataclass(frozen=True, kw_only=True)
class Discovery(Message):
    """``duplex_hub/discovery/<hub_id>`` (retained): the hub announces itself."""

    id: str = id_field(pattern=r"[A-Za-z0-9_-]+")
    name: str = rule_field("", max_len=200)
    version: str = rule_field("", max_len=40)
    protocol: int = PROTOCOL_VERSION
    base_topic: str = rule_field("", max_len=200)
    site: str | None = None
    availability_topic: str = rule_field("", max_len=250)
    capabilities: tuple[str, ...] = ()
    language: str = rule_field("en", max_len=20)


@dataclass(frozen=True, kw_only=True)
class TimerInfo(Message):
    """A timer the hub keeps (it ends ``seconds_left`` after the status was published)."""

    id: str = id_field()
    name: str | None = None
    area: str | None = None
    seconds_left: int = 0
    is_active: bool = True


@dataclass(frozen=True, kw_only=True)
class Status(Message):
    """``<base>/state`` (retained): the dialogue state, mute, volume and the hub's timers."""

    state: str = rule_field(choices=DIALOGUE_STATES)
    muted: bool = False
    volume: float = number_field(0.0, 4.0, 1.0)
    site: str | None = None
    timers: tuple[TimerInfo, ...] = ()


@dataclass(frozen=True, kw_only=True)
class IntentData(Message):
    """An intent: its name, its slots (as matched) and the entity ids it resolved to."""

    name: str = rule_field(min_len=1, max_len=100)
    slots: dict[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Timestamps(Message):
    """When an intent was recognised: wall clock, and the loop's clock in ms."""

    time: str = ""
    intent_ms: int | None = None
    speech_start_ms: int | None = None
    speech_end_ms: int | None = None  # the end of speech: end_of_turn less the silence waited


@dataclass(frozen=True, kw_only=True)
class IntentMessage(Message):
    """``<base>/intent``: an intent the hub recognised, from speech or from ``ask``.

    A resend after a reconnect keeps its ``id``; ``request_id`` is the ``ask`` it answers.
    """

    id: str = id_field()
    site: str | None = None
    text: str = ""
    intent: IntentData
    confidence: float = number_field(0.0, 1.0, 1.0)
    source: str | None = None  # grammar | llm
    request_id: str | None = None
    timestamps: Timestamps = field(default_factory=Timestamps)
    error: str | None = rule_field(None, omit_none=True)


@dataclass(frozen=True, kw_only=True)
class AskResponse(Message):
    """``<base>/ask/response``: the reply to an :class:`Ask` with the same ``id``.

    ``expects_reply``: the reply asks the user something (a confirmation, which room); the
    next ``ask`` of the same conversation answers it.
    """

    id: str = id_field()
    conversation_id: str | None = None
    site: str | None = None
    text: str = ""
    intent: IntentData | None = None
    source: str | None = None
    response: str = ""
    success: bool = False
    expects_reply: bool = False


@dataclass(frozen=True, kw_only=True)
class Broadcast(Message):
    """``duplex_hub/broadcast``: a message to say in every room (HassBroadcast), from ``hub_id``."""

    message: str = text_field()
    hub_id: str = id_field()
    site: str | None = None


# -- in: commands a hub takes ------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Say(Message):
    """``<base>/say``: speak text, now (interrupting) or after what is being said."""

    BARE: ClassVar[str | None] = "text"
    text: str = text_field()
    interrupt: bool = False
    id: str | None = id_field(None)


@dataclass(frozen=True, kw_only=True)
class Ask(Message):
    """``<base>/ask``: text handled as if spoken; the reply goes to ``ask/response``."""

    text: str = text_field()
    id: str = id_field()
    conversation_id: str | None = id_field(None)
    language: str | None = rule_field(None, max_len=20)
    speak: bool = False  # also say the reply aloud


@dataclass(frozen=True, kw_only=True)
class Mute(Message):
    """``<base>/mute`` / ``<base>/unmute`` (the payload is ignored)."""

    muted: bool


@dataclass(frozen=True, kw_only=True)
class SessionCommand(Message):
    """``<base>/session/start`` / ``session/end``, optionally saying text."""

    EMPTY_OK: ClassVar[bool] = True
    start: bool = True  # from the topic, not the payload
    text: str | None = text_field(None)


@dataclass(frozen=True, kw_only=True)
class Volume(Message):
    """``<base>/volume``: speaker gain 0 to 4 (1 = as synthesised); a bare number works."""

    BARE: ClassVar[str | None] = "volume"
    BARE_NUMBER: ClassVar[bool] = True
    volume: float = number_field(0.0, 4.0)


@dataclass(frozen=True, kw_only=True)
class CatalogMessage(Message):
    """``<base>/catalog`` (retained): the home's entities (a bare list works too).

    Each entity has ``entity_id``, ``name`` and optionally ``area``, ``aliases``,
    ``state``, ``attributes``; the hub checks them like its catalog file.
    """

    entities: list[dict[str, Any]]

    @classmethod
    def from_json(cls, payload: Payload) -> Self:
        """A JSON object with ``entities``, or the bare list."""
        data = parse_json(payload)
        return cls.from_dict({"entities": data} if isinstance(data, list) else data)


@dataclass(frozen=True, kw_only=True)
class EntityState(Message):
    """One entity's state and attributes (a change since the catalog)."""

    entity_id: str = rule_field(min_len=3, max_len=255)
    state: str = rule_field(max_len=255)
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CatalogStates(Message):
    """``<base>/catalog/states``: new states of entities of the catalog (names unchanged)."""

    entities: tuple[EntityState, ...]


@dataclass(frozen=True, kw_only=True)
class IntentResult(Message):
    """``<base>/intent/result``: the outcome of an intent executed elsewhere."""

    id: str = id_field()
    text: str | None = text_field(None)
    success: bool = True
    targets: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Controller(Message):
    """``<base>/controller`` (retained): who executes intents; an empty payload = the hub."""

    name: str = text_field(max_len=80)
    timeout_s: float = number_field(0.1, 60.0, 5.0)


Command = (Say | Ask | Mute | SessionCommand | Volume | CatalogMessage | CatalogStates | IntentResult | Controller
           | None)


def parse_command(relative: str, payload: bytes, *, max_bytes: int) -> Command:
    """Validate a payload on a command topic; None is an empty ``controller`` (standalone)."""
    limit = max_bytes * (CATALOG_SIZE_FACTOR if relative in (CATALOG, CATALOG_STATES) else 1)
    if len(payload) > limit:
        raise BadPayload(f"{len(payload)} bytes is larger than the limit of {limit}")
    if relative in (MUTE, UNMUTE):
        return Mute(muted=relative == MUTE)
    if relative in (SESSION_START, SESSION_END):
        parsed = SessionCommand.from_json(payload)
        return dataclasses.replace(parsed, start=relative == SESSION_START)
    if relative == CONTROLLER and not payload.strip():
        return None
    kinds: dict[str, type[Message]] = {SAY: Say, ASK: Ask, VOLUME: Volume, CATALOG: CatalogMessage,
                                       CATALOG_STATES: CatalogStates, INTENT_RESULT: IntentResult,
                                       CONTROLLER: Controller}
    kind = kinds.get(relative)
    if kind is None:
        raise BadPayload(f"unknown command {relative!r}")
    return typing.cast(Command, kind.from_json(payload))


# -- dialogue events -----------------------------------------------------------------------------
EVENTS: dict[str, type[Event]] = {}


@dataclass(frozen=True, kw_only=True)
class Event(Message):
    """A dialogue event: ``{"t_ms", "type", ...}`` (plus ``site`` on MQTT).

    ``t_ms`` is the loop's clock: the input position for a file, else ms since the start.
    """

    type: ClassVar[str] = ""
    t_ms: int = 0
    site: str | None = rule_field(None, omit_none=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register the subclass by its ``type``."""
        super().__init_subclass__(**kwargs)
        if cls.type:
            EVENTS[cls.type] = cls

    def to_dict(self) -> dict[str, Any]:
        """``t_ms`` and ``type`` first."""
        return {"t_ms": self.t_ms, "type": self.type, **{k: v for k, v in super().to_dict().items()
                                                          if k != "t_ms"}}


def event_from_dict(data: Any) -> Event:
    """Any dialogue event, by its ``type``."""
    kind = data.get("type") if isinstance(data, dict) else None
    cls = EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise BadPayload(f"type: {kind!r} is not a dialogue event")
    return cls.from_dict(data)


def event_from_json(payload: Payload) -> Event:
    """Any dialogue event from its JSON."""
    return event_from_dict(parse_json(payload))


@dataclass(frozen=True, kw_only=True)
class SpeechStart(Event):
    """The user started speaking (``onset_ms``: where the speech began)."""

    type: ClassVar[str] = "speech_start"
    onset_ms: int


@dataclass(frozen=True, kw_only=True)
class SpeechEnd(Event):
    """The user stopped speaking (``offset_ms``: where the speech ended)."""

    type: ClassVar[str] = "speech_end"
    offset_ms: int


@dataclass(frozen=True, kw_only=True)
class EndOfTurn(Event):
    """The turn stage closed the user's turn after ``silence_ms`` (``discard``: not one to answer)."""

    type: ClassVar[str] = "end_of_turn"
    silence_ms: int = 0
    discard: bool = False


@dataclass(frozen=True, kw_only=True)
class Partial(Event):
    """The running hypothesis; ``complete`` when it already is a full command."""

    type: ClassVar[str] = "partial"
    text: str
    complete: bool = False


@dataclass(frozen=True, kw_only=True)
class Transcript(Event):
    """The final words of a turn; ``tier`` is grammar, open or typed (the dashboard).

    ``unsure``: another sentence that means something else was nearly as likely, or other
    voices were in the room and the action carries free text or is in Whisper's own words
    (``tier`` open), so the hub asks before it acts
    ("Did you say ...?").
    """

    type: ClassVar[str] = "transcript"
    text: str
    tier: str = "grammar"
    confidence: float = 0.0
    open_text: str | None = rule_field(None, omit_none=True)
    grammar_text: str | None = rule_field(None, omit_none=True)
    grammar_confidence: float | None = rule_field(None, omit_none=True)
    unsure: bool | None = rule_field(None, omit_none=True)


@dataclass(frozen=True, kw_only=True)
class IntentRecognized(Event):
    """An intent recognised in a turn (published on ``<base>/intent``, not as an event)."""

    type: ClassVar[str] = "intent"
    id: str
    name: str
    slots: dict[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()
    source: str | None = None
    text: str = ""
    confidence: float = 1.0
    error: str | None = None
    call: str | None = rule_field(None, omit_none=True)

    @property
    def data(self) -> IntentData:
        """The intent as it goes over MQTT."""
        return IntentData(name=self.name, slots=self.slots, targets=self.targets)


@dataclass(frozen=True, kw_only=True)
class Response(Event):
    """The hub's whole reply to a turn (``source``: grammar, llm, or None for no match)."""

    type: ClassVar[str] = "response"
    text: str
    source: str | None = None
    expects_reply: bool = False


@dataclass(frozen=True, kw_only=True)
class TtsStart(Event):
    """The first sample of an utterance reached the speaker."""

    type: ClassVar[str] = "tts_start"
    utterance: int


@dataclass(frozen=True, kw_only=True)
class TtsEnd(Event):
    """The last sample of an utterance was played."""

    type: ClassVar[str] = "tts_end"
    utterance: int
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class BargeIn(Event):
    """The user spoke over the hub: playback paused (``playing``: audio was playing)."""

    type: ClassVar[str] = "barge_in"
    onset_ms: int
    playing: bool = True


@dataclass(frozen=True, kw_only=True)
class TtsResumed(Event):
    """It was a backchannel: playback resumed where it paused."""

    type: ClassVar[str] = "tts_resumed"


@dataclass(frozen=True, kw_only=True)
class TtsCancelled(Event):
    """The reply was stopped for good after ``played_ms`` of it."""

    type: ClassVar[str] = "tts_cancelled"
    played_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class WakeWordDetected(Event):
    """The wake word was heard: a session opens."""

    type: ClassVar[str] = "wake_word"
    name: str


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    """Something failed; the loop goes on."""

    type: ClassVar[str] = "error"
    message: str


@dataclass(frozen=True, kw_only=True)
class StateChanged(Event):
    """The dialogue state changed (also published, retained, as :class:`Status`)."""

    type: ClassVar[str] = "state"
    state: str = rule_field(choices=DIALOGUE_STATES)


@dataclass(frozen=True, kw_only=True)
class Candidate(Message):
    """A room that heard an utterance, and how loud (the mean level of its loudest speech frames)."""

    site: str
    level_db: float
    text: str = ""


@dataclass(frozen=True, kw_only=True)
class Arbitration(Event):
    """Several rooms heard the same utterance: the loudest (``winner``) answers, the others stay silent."""

    type: ClassVar[str] = "arbitration"
    winner: str
    answered: bool  # whether the room that sends this event answers
    candidates: tuple[Candidate, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TimerEvent(Event):
    """A timer changed: ``started``, ``updated``, ``paused``, ``resumed``, ``cancelled`` or ``finished``."""

    type: ClassVar[str] = "timer"
    action: str
    id: str
    seconds_left: int = 0
    name: str | None = None
    area: str | None = None


@dataclass(frozen=True, kw_only=True)
class CatalogApplied(Event):
    """A catalog from MQTT was applied (``rebuilt``: the names changed, so the grammar)."""

    type: ClassVar[str] = "catalog_applied"
    entities: int
    version: int
    rebuilt: bool
