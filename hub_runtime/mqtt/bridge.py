"""The bridge between one dialogue loop and MQTT: events out, commands in.

Owns the link (and the embedded broker when no broker is configured). Loop events
arrive through :meth:`MqttBridge.on_event` (an :class:`~hub_runtime.runner.EventLog`
listener); inbound payloads are validated by :mod:`.messages` and handled in arrival
order by one task, except catalog rebuilds, which run beside it (the newest wins).
A bad payload is logged with its reason, counted in ``rejections`` and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import uuid
from typing import Any, Final

from .. import __version__
from ..agent import Agent, Reply
from ..catalog import Catalog
from ..home import Outcome
from ..loop import DialogueLoop
from ..nlu import Intent
from ..settings import Settings
from . import hermes
from . import topics as t
from .broker import EmbeddedBroker
from .client import MqttLink
from .messages import (
    Ask,
    BadPayload,
    CatalogUpdate,
    Command,
    ControllerUpdate,
    HermesQuery,
    HermesSay,
    HermesSession,
    IntentResult,
    Mute,
    Rejections,
    Say,
    Session,
    Volume,
    parse,
)
from .outbox import Outbox, default_path

_LOGGER = logging.getLogger(__name__)

PROTOCOL_VERSION: Final = 1  # of docs/protocol.md
QUIET_EVENTS: Final = frozenset({"intent", "state"})  # published on their own topics
FAILED_RESULT: Final = "Sorry, that did not work."
CAPABILITIES: Final = ("intents", "events", "say", "ask", "mute", "session", "volume", "catalog",
                       "intent_result", "controller")


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":")).encode()


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


class MqttBridge:
    """Publishes one loop's intents and events; applies commands from other devices."""

    def __init__(self, settings: Settings, loop: DialogueLoop, agent: Agent) -> None:
        """Bridge this loop (its agent answers ``ask`` and takes ``catalog``)."""
        self.settings = settings
        self.mqtt = settings.mqtt
        self.loop = loop
        self.agent = agent
        self.topics = t.Topics(self.mqtt.hub_id)
        self.site = settings.site_id
        self.rejections = Rejections()
        self.broker: EmbeddedBroker | None = None
        self.link: MqttLink | None = None
        self.outbox: Outbox | None = None
        self._commands: asyncio.Queue[Command] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._catalog_task: asyncio.Task[None] | None = None
        self._next_catalog: Catalog | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._speech_start_ms: int | None = None
        self._speech_end_ms: int | None = None
        self._session: str | None = None  # Hermes session of the current turn
        self.catalog_version = 0  # catalogs applied from MQTT

    # -- life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        """Start the embedded broker (if no host is set), open the outbox, connect."""
        m = self.mqtt
        host = m.host
        if host is None:
            self.broker = EmbeddedBroker(m.port)
            await self.broker.start()
            host = "127.0.0.1"
        self.outbox = Outbox(m.outbox or default_path(m.hub_id), m.outbox_max)
        subs = [self.topics(c) for c in t.COMMANDS]
        if m.hermes:
            subs += list(t.HERMES_IN)
        if self.settings.llm.frigate_topic:
            subs.append(self.settings.llm.frigate_topic)
        self.link = MqttLink(m, host=host, port=m.port, outbox=self.outbox, subscriptions=subs,
                             will=(self.topics.availability, b"offline"),
                             on_message=self._on_message, on_connected=self._on_connected)
        self._worker = asyncio.create_task(self._work(), name="mqtt.commands")
        await self.link.start()

    async def stop(self) -> None:
        """Say ``offline``, disconnect, stop the broker."""
        for task in (self._worker, self._catalog_task, *self._tasks):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(x for x in (self._worker, self._catalog_task, *self._tasks) if x),
                             return_exceptions=True)
        if self.link is not None:
            await self.link.stop([(self.topics.availability, b"offline")])
        if self.outbox is not None:
            self.outbox.close()
        if self.broker is not None:
            await self.broker.stop()

    def _on_connected(self) -> None:
        assert self.link is not None
        self.link.publish(self.topics.availability, b"online", qos=1, retain=True)
        self.link.publish(self.topics.discovery, _dumps(self.discovery()), qos=1, retain=True)
        self._publish_state()

    def discovery(self) -> dict[str, Any]:
        """The retained announcement at ``duplex_hub/discovery/<hub_id>``."""
        caps = list(CAPABILITIES) + (["hermes"] if self.mqtt.hermes else [])
        return {"id": self.mqtt.hub_id, "name": self.mqtt.name, "version": __version__,
                "protocol": PROTOCOL_VERSION, "base_topic": self.topics.base, "site": self.site,
                "availability_topic": self.topics.availability, "capabilities": caps,
                "language": self.settings.language}

    # -- out ----------------------------------------------------------------------------
    def on_event(self, event: dict[str, Any]) -> None:
        """A loop event (EventLog listener)."""
        kind = event.get("type", "")
        if kind == "speech_start":
            self._speech_start_ms, self._speech_end_ms = event["t_ms"], None
            if self.mqtt.hermes and self._session is None:
                self._session = uuid.uuid4().hex
                self._publish(t.HERMES_SESSION_STARTED,
                              hermes.session_started(site_id=self.site, session_id=self._session))
        elif kind == "speech_end":
            self._speech_end_ms = event["t_ms"]
        elif kind == "intent":
            self._publish_intent(event)
        elif kind == "state":
            self._publish_state()
        elif kind == "response" and self._session is not None:
            self._publish(t.HERMES_SESSION_ENDED,
                          hermes.session_ended(site_id=self.site, session_id=self._session))
            self._session = None
        if kind not in QUIET_EVENTS:
            self._publish(self.topics.event(kind), {**event, "site": self.site})

    def _publish(self, topic: str, data: Any, *, qos: int = 0, retain: bool = False) -> None:
        if self.link is not None:
            self.link.publish(topic, _dumps(data), qos=qos, retain=retain)

    def _publish_state(self) -> None:
        self._publish(self.topics.state, {"state": self.loop.state.activity.value,
                                          "muted": self.loop.muted,
                                          "volume": self.loop.output.volume, "site": self.site},
                      qos=1, retain=True)

    def _publish_intent(self, event: dict[str, Any], *, request_id: str | None = None) -> None:
        payload = {
            "id": event["id"],
            "site": self.site,
            "text": event.get("text", ""),
            "intent": {"name": event["name"], "slots": event.get("slots", {}),
                       "targets": event.get("targets", [])},
            "confidence": event.get("confidence", 1.0),
            "source": event.get("source"),
            "request_id": request_id,
            "timestamps": {"time": _now_iso(), "intent_ms": event.get("t_ms"),
                           "speech_start_ms": None if request_id else self._speech_start_ms,
                           "speech_end_ms": None if request_id else self._speech_end_ms},
        }
        if event.get("error"):
            payload["error"] = event["error"]
        assert self.link is not None
        self.link.publish_reliable(self.topics.intent, _dumps(payload))
        if self.mqtt.hermes:
            intent = Intent(name=event["name"], slots=dict(event.get("slots", {})),
                            targets=list(event.get("targets", [])), text=payload["text"])
            session = self._session or request_id or event["id"]
            data = hermes.intent_payload(intent, text=payload["text"],
                                         confidence=float(payload["confidence"] or 0.0),
                                         site_id=self.site, session_id=session, intent_id=event["id"])
            self.link.publish_reliable(t.hermes_intent(intent.name), _dumps(data))

    # -- in -----------------------------------------------------------------------------
    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic == self.settings.llm.frigate_topic:
            self._frigate(topic, payload)
            return
        command = self.topics.command(topic) or (topic if topic in t.HERMES_IN else None)
        if command is None or (command == t.CATALOG and not payload.strip()):
            return  # an empty catalog is how a retained one is cleared: nothing to apply
        try:
            parsed = parse(command, payload, max_bytes=self.mqtt.max_payload_bytes)
        except BadPayload as err:
            self.rejections.add(topic)
            _LOGGER.warning("dropped a payload on %s: %s (%d dropped in all)", topic, err,
                            self.rejections.total)
            return
        if isinstance(parsed, IntentResult):  # at once: a turn may be waiting for it
            self._intent_result(parsed)
            return
        if isinstance(parsed, ControllerUpdate):
            self.agent.controller = parsed.controller
            _LOGGER.info("intents are executed by %s",
                         parsed.controller.name if parsed.controller else "the hub (standalone)")
            return
        if isinstance(parsed, CatalogUpdate):
            self._next_catalog = parsed.catalog
            if self._catalog_task is None or self._catalog_task.done():
                self._catalog_task = asyncio.create_task(self._apply_catalogs(), name="mqtt.catalog")
            return
        self._commands.put_nowait(parsed)

    def _intent_result(self, c: IntentResult) -> None:
        """Hand the outcome to the turn waiting for it, or say it (an unsolicited result)."""
        text = c.text or ("" if c.success else FAILED_RESULT)
        if self.agent.results.resolve(c.id, Outcome(response=text, changed=list(c.targets),
                                                    success=c.success)):
            return
        unknown = [e for e in c.targets if self.agent.model.catalog.get(e) is None]
        if unknown:
            self.rejections.add(self.topics(t.INTENT_RESULT))
            _LOGGER.warning("dropped an intent result for unknown entities %s", unknown)
            return
        if text:
            self.loop.say(text)

    def _frigate(self, topic: str, payload: bytes) -> None:
        """A camera event for the LLM's scene context."""
        if self.loop.llm is None:
            return
        try:
            self.loop.llm.scene.update(payload)
        except ValueError as err:
            self.rejections.add(topic)
            _LOGGER.warning("dropped a payload on %s: %s", topic, err)

    async def _work(self) -> None:
        while True:
            command = await self._commands.get()
            try:
                await self._handle(command)
            except Exception:  # one bad command never stops the others
                _LOGGER.exception("command %s failed", type(command).__name__)

    async def _handle(self, c: Command) -> None:
        loop = self.loop
        if isinstance(c, Say):
            if c.interrupt:
                await loop.say_now(c.text)
            else:
                loop.say(c.text)
        elif isinstance(c, Ask):
            await self._ask(c)
        elif isinstance(c, Mute):
            loop.muted = c.muted
            self._publish_state()
        elif isinstance(c, Session):
            now = loop.clock.now_ms()
            if c.start:
                loop.state.open_session(now)
            else:
                loop.state.end_session()
            if c.text:
                loop.say(c.text)
        elif isinstance(c, Volume):
            loop.set_volume(c.volume)
            self._publish_state()
        elif isinstance(c, HermesSay):
            if c.site_id in (None, self.site):
                loop.say(c.text)
        elif isinstance(c, HermesSession):
            if c.text:
                loop.say(c.text)
            if c.end:
                self._publish(t.HERMES_SESSION_ENDED,
                              hermes.session_ended(site_id=self.site, session_id=c.session_id))
            else:
                loop.state.open_session(loop.clock.now_ms())
        elif isinstance(c, HermesQuery):
            self._nlu_query(c)

    async def _ask(self, c: Ask) -> None:
        """Answer an ``ask``; with a controller the intent is left to it (the asker runs it)."""
        reply = self.agent.respond(c.text)
        if reply.intent is None and self.loop.llm is not None:
            llm_intent, said = await self.loop.llm.answer(c.text)
            reply = Reply(text=c.text, intent=llm_intent, source="llm", response=said)
        intent = reply.intent
        if intent is not None:
            self._publish_intent({"id": uuid.uuid4().hex, "name": intent.name, "slots": intent.slots,
                                  "targets": intent.targets, "source": reply.source, "text": c.text,
                                  "confidence": 1.0, "error": intent.error,
                                  "t_ms": self.loop.clock.now_ms()}, request_id=c.id)
        self._publish(self.topics.response, {
            "id": c.id, "conversation_id": c.conversation_id, "site": self.site, **reply.to_dict(),
            "success": intent is not None and intent.error is None,
        }, qos=1)
        if c.speak and reply.response:
            self.loop.say(reply.response)

    def _nlu_query(self, c: HermesQuery) -> None:
        if c.site_id not in (None, self.site):
            return
        intent = self.agent.recognize(c.input)
        if intent is None:
            self._publish(t.HERMES_NOT_RECOGNIZED, hermes.not_recognized(
                c.input, site_id=self.site, session_id=c.session_id, request_id=c.id))
            return
        data = hermes.intent_payload(intent, text=c.input, confidence=1.0, site_id=self.site,
                                     session_id=c.session_id or c.id or uuid.uuid4().hex,
                                     intent_id=c.id or uuid.uuid4().hex)
        self._publish(t.hermes_intent(intent.name), data, qos=1)

    async def _apply_catalogs(self) -> None:
        """Apply the newest catalog: only the states when the names are the same (no rebuild)."""
        while self._next_catalog is not None:
            catalog, self._next_catalog = self._next_catalog, None
            rebuilt = not self.agent.update_states(catalog)
            if rebuilt:
                await self.agent.replace_catalog(catalog, self.settings)
                await self.loop.asr.reload()
                _LOGGER.info("catalog from MQTT: %d entities", len(catalog))
            self.catalog_version += 1
            self._publish(self.topics.event("catalog_applied"),
                          {"type": "catalog_applied", "entities": len(catalog), "site": self.site,
                           "version": self.catalog_version, "rebuilt": rebuilt})


async def start_bridge(settings: Settings, loop: DialogueLoop, agent: Agent) -> MqttBridge | None:
    """Start a bridge when MQTT is enabled; None when disabled."""
    if not settings.mqtt.enabled:
        return None
    bridge = MqttBridge(settings, loop, agent)
    try:
        await bridge.start()
    except Exception:
        with contextlib.suppress(Exception):
            await bridge.stop()
        raise
    return bridge
