"""The link to one hub over Home Assistant's MQTT: state in, catalog, intents and asks.

One :class:`HubClient` per config entry (its ``runtime_data``). It subscribes once, at
setup, to everything it needs (Home Assistant may send a new subscription late), keeps
the hub's availability, dialogue state, last transcript and turn latency for the
entities, executes the intents the hub publishes from speech and answers with
``intent/result``, and publishes the catalog of exposed entities (retained, debounced).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from homeassistant.components import conversation, mqtt
from homeassistant.components.homeassistant.exposed_entities import (
    async_listen_entity_updates,
    async_should_expose,
)
from homeassistant.const import EVENT_STATE_CHANGED
from homeassistant.core import CALLBACK_TYPE, Event, HomeAssistant, State, callback
from homeassistant.exceptions import ConfigEntryNotReady, HomeAssistantError
from homeassistant.helpers import area_registry as ar
from homeassistant.helpers import device_registry as dr
from homeassistant.helpers import entity_registry as er
from homeassistant.helpers.debounce import Debouncer
from homeassistant.util import ulid as ulid_util

from . import protocol as p
from .const import ASK_TIMEOUT_S, CATALOG_COOLDOWN_S, DOMAIN, EXECUTED_INTENTS, RESULT_TIMEOUT_S, SEEN_INTENTS
from .intents import async_execute, failed, speech_of, targets_of

_LOGGER = logging.getLogger(__name__)

# attributes the hub's replies and LLM context use; the rest stays in Home Assistant
CATALOG_ATTRIBUTES = ("unit_of_measurement", "device_class", "brightness", "color_name",
                      "color_temp_kelvin", "current_temperature", "temperature",
                      "current_position", "friendly_name")


def entity_aliases(hass: HomeAssistant, entry: er.RegistryEntry) -> list[str]:
    """The aliases of an entity as text.

    From Home Assistant 2026.4 the registry's aliases may hold a marker for the computed
    name, which is not text: its helper resolves them; before it, keep the strings.
    """
    resolve = getattr(er, "async_get_entity_aliases", None)
    raw: Any = resolve(hass, entry) if resolve is not None else entry.aliases
    return sorted({a.strip() for a in raw if isinstance(a, str) and a.strip()})


def entity_state(state: State) -> p.EntityState:
    """An entity's state and the attributes the hub uses."""
    attributes = {k: state.attributes[k] for k in CATALOG_ATTRIBUTES if k in state.attributes and k != "friendly_name"}
    return p.EntityState(entity_id=state.entity_id, state=state.state,
                         attributes=json.loads(json.dumps(attributes, default=str)))


def build_catalog(hass: HomeAssistant) -> list[dict[str, Any]]:
    """The entities exposed to Assist, in the hub's catalog format."""
    ents, devs, areas = er.async_get(hass), dr.async_get(hass), ar.async_get(hass)
    out = []
    for state in sorted(hass.states.async_all(), key=lambda s: s.entity_id):
        if not async_should_expose(hass, conversation.DOMAIN, state.entity_id):
            continue
        entry = ents.async_get(state.entity_id)
        if entry is not None and entry.platform == DOMAIN:
            continue  # the hubs' own entities (a muted hub could not hear "unmute")
        aliases: list[str] = []
        area_id = None
        if entry is not None:
            aliases = entity_aliases(hass, entry)
            area_id = entry.area_id
            if area_id is None and entry.device_id and (device := devs.async_get(entry.device_id)):
                area_id = device.area_id
        area = areas.async_get_area(area_id) if area_id else None
        name = str(state.name or state.object_id).strip() or state.object_id
        item: dict[str, Any] = {"entity_id": state.entity_id, "name": name, "state": state.state}
        if area is not None:
            item["area"] = area.name
        if aliases:
            item["aliases"] = aliases
        if attributes := entity_state(state).attributes:
            item["attributes"] = attributes
        out.append(item)
    return out


class HubClient:
    """One hub, seen through Home Assistant's MQTT integration."""

    def __init__(self, hass: HomeAssistant, *, hub_id: str, base_topic: str, name: str,
                 language: str, allowed_intents: list[str] | None = None,
                 prefer_local: bool = False) -> None:
        """A client for the hub at ``base_topic``; nothing is subscribed until setup."""
        self.hass = hass
        self.hub_id = hub_id
        self.topics = p.Topics(base_topic.rstrip("/"))
        self.name = name
        self.language = language
        self.allowed = list(allowed_intents) if allowed_intents else list(EXECUTED_INTENTS)
        self.prefer_local = prefer_local
        self.options: dict[str, Any] = {}  # the entry options this client was made with
        self.available = False
        self.activity: str | None = None
        self.muted: bool | None = None
        self.volume: float | None = None
        self.last_transcript: str | None = None
        self.last_latency_ms: int | None = None
        self.info: p.Discovery | None = None
        self.counts = {"intents": 0, "results": 0, "asks": 0, "dropped": 0, "catalogs": 0}
        self._speech_end_ms: int | None = None
        self._asks: dict[str, asyncio.Future[p.AskResponse]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._listeners: list[CALLBACK_TYPE] = []
        self._unsubs: list[CALLBACK_TYPE] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._catalog_sent: str | None = None
        self.catalog_ids: set[str] = set()  # what the hub was last sent
        self._debouncer: Debouncer[Any] | None = None  # the whole catalog (entities or names changed)
        self._states_debouncer: Debouncer[Any] | None = None  # states of entities the hub knows
        self._changed: set[str] = set()  # entities whose state changed since the last states message
        self._started = False

    # -- life cycle ---------------------------------------------------------------------
    async def async_start(self) -> None:
        """Subscribe (once), announce ourselves as controller, publish the catalog.

        Only with the broker there; on any failure everything is undone and
        ConfigEntryNotReady raised, so Home Assistant retries and nothing is left behind.
        """
        connected = getattr(mqtt, "is_connected", None)
        if connected is not None and not connected(self.hass):
            raise ConfigEntryNotReady(translation_domain=DOMAIN, translation_key="broker_unavailable")
        self._started = True
        try:
            await self._start()
        except HomeAssistantError as err:
            await self.async_stop()
            raise ConfigEntryNotReady(translation_domain=DOMAIN, translation_key="broker_unavailable") from err

    async def _start(self) -> None:
        t = self.topics
        subs: list[tuple[str, Callable[[mqtt.ReceiveMessage], None]]] = [
            (t.availability, self._on_availability),
            (t.state, self._on_state),
            (t.intent, self._on_intent),
            (t.ask_response, self._on_ask_response),
            (t.events, self._on_event),
            (p.discovery_topic(self.hub_id), self._on_discovery),
        ]
        for topic, handler in subs:
            self._unsubs.append(await mqtt.async_subscribe(self.hass, topic, handler, qos=1))
        self._debouncer = Debouncer(self.hass, _LOGGER, cooldown=CATALOG_COOLDOWN_S, immediate=False,
                                    function=self.async_publish_catalog)
        self._states_debouncer = Debouncer(self.hass, _LOGGER, cooldown=CATALOG_COOLDOWN_S, immediate=False,
                                           function=self.async_publish_states)
        self._unsubs.append(self.hass.bus.async_listen(EVENT_STATE_CHANGED, self._on_state_changed))
        for event in (er.EVENT_ENTITY_REGISTRY_UPDATED, ar.EVENT_AREA_REGISTRY_UPDATED,
                      dr.EVENT_DEVICE_REGISTRY_UPDATED):
            self._unsubs.append(self.hass.bus.async_listen(event, self._on_registry_changed))
        self._unsubs.append(async_listen_entity_updates(self.hass, conversation.DOMAIN,
                                                        self._schedule_catalog))
        await self._send(p.CONTROLLER, p.Controller(name="Home Assistant", timeout_s=RESULT_TIMEOUT_S),
                         retain=True)
        await self.async_publish_catalog()

    async def async_stop(self) -> None:
        """Unsubscribe and stop listening; tell the hub it is standalone again (if the broker is there).

        Never raises: an unload with the broker down still succeeds.
        """
        for unsub in self._unsubs:
            unsub()
        self._unsubs.clear()
        for debouncer in (self._debouncer, self._states_debouncer):
            if debouncer is not None:
                debouncer.async_shutdown()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for future in self._asks.values():
            future.cancel()
        self._asks.clear()
        if self._started:
            self._started = False
            try:
                await self._send(p.CONTROLLER, None, retain=True)
            except HomeAssistantError as err:  # the broker is down: the hub keeps the retained controller
                _LOGGER.warning("could not tell hub %s it is standalone again: %s", self.hub_id, err)

    async def _send(self, relative: str, message: p.Message | None, *, retain: bool = False) -> None:
        """Publish a command to the hub (None: an empty payload)."""
        payload = message.to_json() if message is not None else ""
        await mqtt.async_publish(self.hass, self.topics(relative), payload, qos=1, retain=retain)

    # -- listeners (entities) -------------------------------------------------------------
    @callback
    def async_add_listener(self, update: CALLBACK_TYPE) -> CALLBACK_TYPE:
        """Call ``update`` when anything the entities show changes."""
        self._listeners.append(update)

        @callback
        def remove() -> None:
            self._listeners.remove(update)
        return remove

    @callback
    def _notify(self) -> None:
        for update in list(self._listeners):
            update()

    # -- catalog ------------------------------------------------------------------------
    async def async_publish_catalog(self) -> None:
        """Publish the exposed entities, retained, when the entities or their names changed.

        A change of state alone travels as ``catalog/states``. The whole catalog, states
        included, goes again when the hub comes (back) online, so a restarted hub is current.
        """
        entities = build_catalog(self.hass)
        message = p.CatalogMessage(entities=entities)
        signature = repr([(e["entity_id"], e["name"], e.get("area"), e.get("aliases")) for e in entities])
        if signature == self._catalog_sent:
            return
        self._catalog_sent = signature
        self.catalog_ids = {e["entity_id"] for e in entities}
        self.counts["catalogs"] += 1
        await self._send(p.CATALOG, message, retain=True)

    @callback
    def _schedule_catalog(self) -> None:
        if self._debouncer is not None:
            self.hass.async_create_task(self._debouncer.async_call(), eager_start=True)

    async def async_publish_states(self) -> None:
        """Publish the new states of entities the hub already knows (not the whole catalog)."""
        changed, self._changed = self._changed, set()
        states = [entity_state(s) for s in map(self.hass.states.get, sorted(changed)) if s is not None]
        if states:
            await self._send(p.CATALOG_STATES, p.CatalogStates(entities=tuple(states)))

    @callback
    def _on_state_changed(self, event: Event[Any]) -> None:
        entity_id = event.data.get("entity_id", "")
        if event.data.get("new_state") is None:
            if entity_id in self.catalog_ids:
                self._schedule_catalog()  # removed: the entity list changed
        elif entity_id in self.catalog_ids:
            self._changed.add(entity_id)
            if self._states_debouncer is not None:
                self.hass.async_create_task(self._states_debouncer.async_call(), eager_start=True)
        elif async_should_expose(self.hass, conversation.DOMAIN, entity_id):
            self._schedule_catalog()  # a new exposed entity

    @callback
    def _on_registry_changed(self, _event: Event[Any]) -> None:
        self._schedule_catalog()

    # -- from the hub -------------------------------------------------------------------
    def _drop(self, msg: mqtt.ReceiveMessage, why: str) -> None:
        self.counts["dropped"] += 1
        _LOGGER.warning("dropped a message on %s: %s", msg.topic, why)

    @callback
    def _on_availability(self, msg: mqtt.ReceiveMessage) -> None:
        available = msg.payload == p.ONLINE
        if available != self.available:
            self.available = available
            _LOGGER.info("hub %s is %s", self.hub_id, p.ONLINE if available else p.OFFLINE)
            if not available:
                for future in self._asks.values():
                    if not future.done():
                        future.set_exception(ConnectionError("the hub went offline"))
            elif self._started:
                self._catalog_sent = None  # (back) online: the whole catalog, with today's states
                self._schedule_catalog()
            self._notify()

    def _parse[M: p.Message](self, msg: mqtt.ReceiveMessage, kind: type[M]) -> M | None:
        """The payload as a ``kind`` message, or None (dropped, logged and counted)."""
        try:
            return kind.from_json(msg.payload)
        except p.BadPayload as err:
            self._drop(msg, str(err))
            return None

    @callback
    def _on_state(self, msg: mqtt.ReceiveMessage) -> None:
        if (status := self._parse(msg, p.Status)) is not None:
            self.activity, self.muted, self.volume = status.state, status.muted, status.volume
            self._notify()

    @callback
    def _on_discovery(self, msg: mqtt.ReceiveMessage) -> None:
        if not msg.payload:  # an empty payload clears a retained announcement
            return
        self.info = self._parse(msg, p.Discovery) or self.info
        devices = dr.async_get(self.hass)
        if self.info is not None and (device := devices.async_get_device(identifiers={(DOMAIN, self.hub_id)})):
            devices.async_update_device(device.id, sw_version=self.info.version or None)

    @callback
    def _on_event(self, msg: mqtt.ReceiveMessage) -> None:
        try:
            event = p.event_from_json(msg.payload)
        except p.BadPayload as err:
            self._drop(msg, str(err))
            return
        if isinstance(event, p.Transcript) and event.text:
            self.last_transcript = event.text
            self._notify()
        elif isinstance(event, p.EndOfTurn):
            # the end of speech: the turn's end less the silence it waited (the VAD's own
            # speech_end often comes after the reply started)
            self._speech_end_ms = None if event.discard else event.t_ms - event.silence_ms
        elif isinstance(event, p.TtsStart) and self._speech_end_ms is not None:
            self.last_latency_ms = max(0, event.t_ms - self._speech_end_ms)
            self._speech_end_ms = None
            self._notify()

    @callback
    def _on_ask_response(self, msg: mqtt.ReceiveMessage) -> None:
        answer = self._parse(msg, p.AskResponse)
        future = self._asks.get(answer.id) if answer is not None else None
        if answer is not None and future is not None and not future.done():
            future.set_result(answer)

    @callback
    def _on_intent(self, msg: mqtt.ReceiveMessage) -> None:
        message = self._parse(msg, p.IntentMessage)
        if message is None or message.request_id is not None:
            return  # an ask's answer: the conversation agent that asked executes it
        if message.intent.name in p.TIMER_INTENTS:
            return  # the hub keeps its timers itself
        if message.id in self._seen:
            return  # resent by the hub's outbox after a reconnect
        self._seen[message.id] = None
        while len(self._seen) > SEEN_INTENTS:
            self._seen.popitem(last=False)
        self.counts["intents"] += 1
        task = self.hass.async_create_background_task(self._execute(message), name="duplex_hub intent")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _execute(self, message: p.IntentMessage) -> None:
        """A voice intent: execute it, then tell the hub the outcome (it speaks it)."""
        response = await async_execute(self.hass, message.intent, text=message.text,
                                       language=self.language, allowed=self.allowed)
        self.counts["results"] += 1
        await self._send(p.INTENT_RESULT, p.IntentResult(
            id=message.id, success=not failed(response), text=speech_of(response),
            targets=tuple(targets_of(response))))

    # -- to the hub ---------------------------------------------------------------------
    async def async_ask(self, text: str, *, conversation_id: str | None, language: str) -> p.AskResponse:
        """The hub's answer to a text turn; TimeoutError or ConnectionError when there is none."""
        if not self.available:
            raise ConnectionError("the hub is offline")
        request_id = ulid_util.ulid_now()
        future: asyncio.Future[p.AskResponse] = self.hass.loop.create_future()
        self._asks[request_id] = future
        self.counts["asks"] += 1
        try:
            await self._send(p.ASK, p.Ask(id=request_id, text=text, conversation_id=conversation_id,
                                          language=language))
            async with asyncio.timeout(ASK_TIMEOUT_S):
                return await future
        finally:
            self._asks.pop(request_id, None)

    async def async_say(self, text: str, *, interrupt: bool = False) -> None:
        """Make the hub speak."""
        await self._send(p.SAY, p.Say(text=text, interrupt=interrupt))

    async def async_set_muted(self, muted: bool) -> None:
        """Mute or unmute the hub's microphone."""
        await self._send(p.MUTE if muted else p.UNMUTE, None)
