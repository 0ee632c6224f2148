"""The bridge between one dialogue loop and MQTT: events out, commands in.

Owns the link (and the embedded broker when no broker is configured). It speaks only the
typed messages of :mod:`..protocol` and uses only the loop's edge interface. Loop events
arrive through :meth:`MqttBridge.on_event` (an :class:`~..events.EventLog` listener);
inbound payloads are validated into messages and handled in arrival order by one task,
except controller results (at once: a turn may be waiting) and catalog rebuilds (beside
it; the newest wins). A bad payload is logged with its reason, counted and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import __version__
from .. import protocol as p
from ..audio.format import AudioFormatError, Int16Array, wav_bytes, wav_samples
from ..catalog import Catalog, CatalogError
from ..loop import DialogueLoop
from ..settings import Settings
from ..understanding import Recognized
from . import hermes
from .broker import EmbeddedBroker
from .client import MqttLink
from .outbox import Outbox, default_path

if TYPE_CHECKING:
    from ..rooms import Rooms

_LOGGER = logging.getLogger(__name__)

OWN_TOPICS = (p.IntentRecognized, p.StateChanged)  # published on their own topics, not as events


@dataclass(frozen=True)
class CatalogUpdate:
    """A ``catalog`` payload, checked like the catalog file."""

    catalog: Catalog


Inbound = p.Command | hermes.HermesCommand | CatalogUpdate


def parse_inbound(name: str, payload: bytes, *, max_bytes: int) -> Inbound:
    """Validate an inbound payload: ``name`` is a command (relative to the base) or a Hermes topic."""
    if name in hermes.INBOUND:
        return hermes.parse(name, payload, max_bytes=max_bytes)
    command = p.parse_command(name, payload, max_bytes=max_bytes)
    if isinstance(command, p.CatalogMessage):
        try:
            return CatalogUpdate(Catalog.from_dict({"entities": command.entities}))
        except CatalogError as err:
            raise p.BadPayload(str(err)) from None
    return command


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


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


class MqttBridge:
    """Publishes one loop's intents and events; applies commands from other devices."""

    def __init__(self, settings: Settings, loop: DialogueLoop, rooms: Rooms | None = None) -> None:
        """Bridge this loop (and the satellites' ``rooms``: Hermes audio frames)."""
        self.settings = settings
        self.rooms = rooms
        self.mqtt = settings.mqtt
        self.loop = loop
        self.topics = p.Topics.for_hub(self.mqtt.hub_id)
        self.site = settings.site_id
        self.rejections = Rejections()
        self.broker: EmbeddedBroker | None = None
        self.link: MqttLink | None = None
        self.outbox: Outbox | None = None
        self._commands: asyncio.Queue[tuple[str, Inbound]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._audio_tasks: set[asyncio.Task[None]] = set()
        self._joining: dict[str, list[Int16Array]] = {}  # frames of rooms being made
        self._catalog_task: asyncio.Task[None] | None = None
        self._next_catalog: Catalog | None = None
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
        subs = [self.topics(c) for c in p.COMMANDS] + [p.BROADCAST_TOPIC]
        if m.hermes:
            subs += list(hermes.INBOUND)
            if self.rooms is not None:
                subs.append(hermes.AUDIO_FRAMES)
        if self.settings.llm.frigate_topic:
            subs.append(self.settings.llm.frigate_topic)
        self.link = MqttLink(m, host=host, port=m.port, outbox=self.outbox, subscriptions=subs,
                             will=(self.topics.availability, p.OFFLINE.encode()),
                             on_message=self._on_message, on_connected=self._on_connected)
        self._worker = asyncio.create_task(self._work(), name="mqtt.commands")
        await self.link.start()

    async def ready(self) -> None:
        """Until connected with the subscriptions acknowledged (the caller bounds the wait)."""
        assert self.link is not None
        await self.link.ready.wait()

    async def stop(self) -> None:
        """Say ``offline``, disconnect, stop the broker."""
        tasks = [t for t in (self._worker, self._catalog_task, *self._audio_tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.link is not None:
            await self.link.stop([(self.topics.availability, p.OFFLINE.encode())])
        if self.outbox is not None:
            self.outbox.close()
        if self.broker is not None:
            await self.broker.stop()

    def _on_connected(self) -> None:
        self._publish(self.topics.availability, p.ONLINE, qos=1, retain=True)
        self._publish(p.discovery_topic(self.mqtt.hub_id), self.discovery(), qos=1, retain=True)
        self.publish_status()

    def discovery(self) -> p.Discovery:
        """The retained announcement at ``duplex_hub/discovery/<hub_id>``."""
        caps = p.CAPABILITIES + (("hermes",) if self.mqtt.hermes else ())
        return p.Discovery(id=self.mqtt.hub_id, name=self.mqtt.name, version=__version__,
                           base_topic=self.topics.base, site=self.site,
                           availability_topic=self.topics.availability, capabilities=caps,
                           language=self.settings.language)

    # -- out ----------------------------------------------------------------------------
    def on_event(self, event: p.Event) -> None:
        """A loop event (EventLog listener)."""
        if isinstance(event, p.SpeechStart):
            self._speech_start_ms, self._speech_end_ms = event.t_ms, None
            if self.mqtt.hermes and self._session is None:
                self._session = uuid.uuid4().hex
                self._publish(hermes.SESSION_STARTED,
                              hermes.session_started(site_id=self.site, session_id=self._session))
        elif isinstance(event, p.EndOfTurn) and not event.discard:
            self._speech_end_ms = event.t_ms - event.silence_ms  # the VAD's speech_end may come later
        elif isinstance(event, p.IntentRecognized):
            self._publish_intent(event)
            if event.name == "HassBroadcast":
                self._broadcast(event)
        elif isinstance(event, p.StateChanged | p.TimerEvent):
            self.publish_status()
        elif isinstance(event, p.Response) and self._session is not None:
            self._publish(hermes.SESSION_ENDED, hermes.session_ended(site_id=self.site, session_id=self._session))
            self._session = None
        if not isinstance(event, OWN_TOPICS):
            self._publish(self.topics.event(event.type), event.to_dict() | {"site": self.site})

    def _publish(self, topic: str, data: p.Message | dict[str, Any] | str | bytes, *, qos: int = 0,
                 retain: bool = False) -> None:
        if self.link is not None:
            self.link.publish(topic, _payload(data), qos=qos, retain=retain)

    def publish_status(self) -> None:
        """Publish the hub's status (retained): after a change that came from elsewhere, e.g. a button."""
        self._publish(self.topics.state, self.loop.status(), qos=1, retain=True)

    def _broadcast(self, event: p.IntentRecognized) -> None:
        """A HassBroadcast heard here is said by every other hub."""
        message = str(event.slots.get("message", "")).strip()
        if message and event.error is None:
            self._publish(p.BROADCAST_TOPIC, p.Broadcast(message=message, hub_id=self.mqtt.hub_id, site=self.site),
                          qos=1)

    def _publish_intent(self, event: p.IntentRecognized, *, request_id: str | None = None) -> None:
        spoken = request_id is None
        message = p.IntentMessage(
            id=event.id, site=self.site, text=event.text, intent=event.data, confidence=event.confidence,
            source=event.source, request_id=request_id, error=event.error,
            timestamps=p.Timestamps(time=_now_iso(), intent_ms=event.t_ms,
                                    speech_start_ms=self._speech_start_ms if spoken else None,
                                    speech_end_ms=self._speech_end_ms if spoken else None))
        assert self.link is not None
        self.link.publish_reliable(self.topics.intent, _payload(message))
        if self.mqtt.hermes:
            data = hermes.intent_payload(event.data, text=event.text, confidence=event.confidence,
                                         site_id=self.site, session_id=self._session or request_id or event.id,
                                         intent_id=event.id)
            self.link.publish_reliable(hermes.intent_topic(event.name), _payload(data))

    # -- in -----------------------------------------------------------------------------
    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic == p.BROADCAST_TOPIC:
            try:
                broadcast = p.Broadcast.from_json(payload)
            except p.BadPayload as err:
                self._reject(topic, str(err))
                return
            if broadcast.hub_id != self.mqtt.hub_id:
                self.loop.say(broadcast.message)
            return
        if (site := hermes.audio_frame_site(topic)) is not None:
            if self.rooms is not None and site != self.site:
                self._audio_frame(topic, site, payload)
            return
        if topic == self.settings.llm.frigate_topic:
            try:
                self.loop.camera_event(payload)
            except ValueError as err:
                self._reject(topic, str(err))
            return
        relative = self.topics.command(topic)
        if relative is None and topic not in hermes.INBOUND:
            return
        if relative == p.CATALOG and not payload.strip():
            return  # an empty catalog is how a retained one is cleared: nothing to apply
        try:
            command = parse_inbound(relative or topic, payload, max_bytes=self.mqtt.max_payload_bytes)
        except p.BadPayload as err:
            self._reject(topic, str(err))
            return
        if command is None or isinstance(command, p.Controller):
            self.loop.set_controller(command)
        elif isinstance(command, p.IntentResult):  # at once: a turn may be waiting for it
            if not self.loop.take_result(command):
                self._reject(topic, "it names entities the catalog does not know")
        elif isinstance(command, p.CatalogStates):
            if unknown := self.loop.update_states(command):
                _LOGGER.info("states of entities not in the catalog ignored: %s", unknown[:5])
        elif isinstance(command, CatalogUpdate):
            self._next_catalog = command.catalog
            if self._catalog_task is None or self._catalog_task.done():
                self._catalog_task = asyncio.create_task(self._apply_catalogs(), name="mqtt.catalog")
        else:
            self._commands.put_nowait((topic, command))

    def _audio_frame(self, topic: str, site: str, payload: bytes) -> None:
        """A satellite's microphone (a WAV chunk): the room hears it; what its speaker plays goes back."""
        assert self.rooms is not None
        try:
            samples = wav_samples(payload)
        except AudioFormatError as err:
            self._reject(topic, str(err))
            return
        room = self.rooms.rooms.get(site)
        if room is not None:  # in order, as the frames came
            self._play(site, room.feed(samples))
            return
        waiting = self._joining.setdefault(site, [])
        waiting.append(samples)
        if len(waiting) == 1:  # the first frame of a new room: make its loop, then feed what came meanwhile
            task = asyncio.create_task(self._join(site), name=f"mqtt.room.{site}")
            self._audio_tasks.add(task)
            task.add_done_callback(self._audio_tasks.discard)

    async def _join(self, site: str) -> None:
        assert self.rooms is not None
        room = await self.rooms.room(site)
        for samples in self._joining.pop(site, []):
            self._play(site, room.feed(samples))

    def _play(self, site: str, speaker: Int16Array) -> None:
        """What a satellite's speaker plays (nothing while the room is silent)."""
        if speaker.size and np.any(speaker):
            self._publish(hermes.play_bytes_topic(site, uuid.uuid4().hex), wav_bytes(speaker))

    def _reject(self, topic: str, why: str) -> None:
        self.rejections.add(topic)
        _LOGGER.warning("dropped a payload on %s: %s (%d dropped in all)", topic, why, self.rejections.total)

    async def _work(self) -> None:
        while True:
            topic, command = await self._commands.get()
            try:
                await self._handle(command)
            except Exception:  # one bad command never stops the others
                _LOGGER.exception("command on %s failed", topic)

    async def _handle(self, c: Inbound) -> None:
        loop = self.loop
        if isinstance(c, p.Say):
            if c.interrupt:
                await loop.say_now(c.text)
            else:
                loop.say(c.text)
        elif isinstance(c, p.Ask):
            await self._ask(c)
        elif isinstance(c, p.Mute):
            loop.mute(c.muted)
            self.publish_status()
        elif isinstance(c, p.SessionCommand):
            loop.open_session(c.start)
            if c.text:
                loop.say(c.text)
        elif isinstance(c, p.Volume):
            loop.set_volume(c.volume)
            self.publish_status()
        elif isinstance(c, hermes.HermesSay):
            if c.site_id in (None, self.site):
                loop.say(c.text)
        elif isinstance(c, hermes.HermesSession):
            if c.text:
                loop.say(c.text)
            if c.end:
                self._publish(hermes.SESSION_ENDED, hermes.session_ended(site_id=self.site, session_id=c.session_id))
            else:
                loop.open_session()
        elif isinstance(c, hermes.HermesQuery):
            self._nlu_query(c)

    async def _ask(self, c: p.Ask) -> None:
        """Answer an ``ask`` through the loop's understanding; with a controller the asker runs the intent."""
        def publish(piece: Recognized) -> None:
            event = p.IntentRecognized(id=piece.intent_id, name=piece.intent.name, slots=dict(piece.intent.slots),
                                       targets=tuple(piece.intent.targets), source=piece.source, text=c.text,
                                       confidence=1.0, error=piece.intent.error, call=piece.call,
                                       t_ms=self.loop.clock.now_ms())
            self._publish_intent(event, request_id=c.id)
            if event.name == "HassBroadcast":
                self._broadcast(event)

        reply = await self.loop.ask(c.text, delegate=True, conversation=c.conversation_id, on_intent=publish)
        intent = reply.intent
        self._publish(self.topics.ask_response, p.AskResponse(
            id=c.id, conversation_id=c.conversation_id, site=self.site, text=c.text,
            intent=intent.to_data() if intent else None, source=reply.source, response=reply.response,
            success=reply.success, expects_reply=reply.expects_reply), qos=1)
        if c.speak and reply.response:
            self.loop.say(reply.response)

    def _nlu_query(self, c: hermes.HermesQuery) -> None:
        if c.site_id not in (None, self.site):
            return
        intent = self.loop.recognize(c.input)
        if intent is None:
            self._publish(hermes.NOT_RECOGNIZED, hermes.not_recognized(
                c.input, site_id=self.site, session_id=c.session_id, request_id=c.id))
            return
        data = hermes.intent_payload(intent.to_data(), text=c.input, confidence=1.0, site_id=self.site,
                                     session_id=c.session_id or c.id or uuid.uuid4().hex,
                                     intent_id=c.id or uuid.uuid4().hex)
        self._publish(hermes.intent_topic(intent.name), data, qos=1)

    async def _apply_catalogs(self) -> None:
        """Apply the newest catalog: only the states when the names are the same (no rebuild)."""
        while self._next_catalog is not None:
            catalog, self._next_catalog = self._next_catalog, None
            rebuilt = await self.loop.set_catalog(catalog)
            if rebuilt:
                _LOGGER.info("catalog from MQTT: %d entities", len(catalog))
            self.catalog_version += 1
            self._publish(self.topics.event(p.CatalogApplied.type), p.CatalogApplied(
                entities=len(catalog), version=self.catalog_version, rebuilt=rebuilt, site=self.site,
                t_ms=self.loop.clock.now_ms()))


def _payload(data: p.Message | dict[str, Any] | str | bytes) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, p.Message):
        return data.to_json().encode()
    if isinstance(data, str):
        return data.encode()
    return p.dumps(data)


async def start_bridge(settings: Settings, loop: DialogueLoop, rooms: Rooms | None = None) -> MqttBridge | None:
    """Start a bridge when MQTT is enabled; None when disabled."""
    if not settings.mqtt.enabled:
        return None
    bridge = MqttBridge(settings, loop, rooms)
    try:
        await bridge.start()
    except Exception:
        with contextlib.suppress(Exception):
            await bridge.stop()
        raise
    return bridge
