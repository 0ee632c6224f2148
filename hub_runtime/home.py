"""Acting on intents in standalone mode, as Home Assistant's handlers would.

The catalog is changed in memory (states and attributes as Home Assistant keeps them),
and the reply comes from the intents' own response templates, rendered with the same
variables Home Assistant gives them (``slots``, ``state``, ``query``). A reply says only
what was done: it is rendered from the outcome, never written beforehand. Timers are
not entities: :mod:`.timers` handles them.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import jinja2
import jinja2.meta

from .catalog import Catalog, Entity
from .grammar import HomeGrammar
from .nlu import Intent

_LOGGER = logging.getLogger(__name__)

BRIGHTNESS_MAX: Final = 255  # Home Assistant's scale for the brightness attribute
VOLUME_STEP: Final = 0.1  # "turn it up": Home Assistant's default volume step
TOGGLE_DOMAINS: Final = ("light", "switch", "fan", "input_boolean")
# what HassTurnOn / HassTurnOff make of an entity of each domain (the rest: on / off)
ON_STATE: Final = {"cover": "open", "valve": "open", "lock": "locked", "climate": "heat", "vacuum": "cleaning",
                   "lawn_mower": "mowing", "media_player": "on"}
OFF_STATE: Final = {"cover": "closed", "valve": "closed", "lock": "unlocked", "climate": "off",
                    "vacuum": "returning", "lawn_mower": "docked", "media_player": "off"}
TRIGGERED: Final = ("scene", "script", "button", "input_button")  # turning on runs them; they keep no state
# HassRespond: the hub answers as itself (Home Assistant's replies name Home Assistant)
RESPOND: Final = {
    "hello": "Hello! What can I do for you?",
    "listening": "I always listen, so you can talk over me, but nothing I hear leaves this device.",
    "data": "Everything you say stays on this device; nothing goes to the cloud.",
    "commands": ("You can ask me to switch lights and devices, set timers, add to your lists, play and "
                 "pause media, or ask about the weather, the time and your home."),
    "creator": "I was made by the Duplex Hub project, with Home Assistant's voice work.",
}


_OTHER_THAN_DOMAIN: Final = re.compile(r"\bstate\b(?!\.domain\b)")  # a template reading more of the target


@dataclass(frozen=True)
class Outcome:
    """What acting on an intent did and what the hub says about it."""

    response: str
    changed: list[str] = field(default_factory=list)
    success: bool = True


class _Obj(dict[str, Any]):
    """A dict whose keys read as attributes in templates."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def state_obj(entity: Entity) -> _Obj:
    """An entity as Home Assistant's templates see a state."""
    return _Obj(entity_id=entity.entity_id, domain=entity.domain, name=entity.name, state=entity.state,
                state_with_unit=entity.state_with_unit, attributes=entity.attributes,
                object_id=entity.entity_id.split(".", 1)[1])


class HandleError(Exception):
    """An intent that cannot be carried out; the message is what the hub says."""


class Home:
    """Applies intents to the in-memory catalog and renders the reply."""

    def __init__(self, catalog: Catalog, grammar: HomeGrammar) -> None:
        """Act on this catalog; take reply templates from this grammar's intents."""
        self.catalog = catalog
        self.responses: dict[str, Any] = grammar.document.get("responses", {})
        self._env = jinja2.Environment(autoescape=False, undefined=jinja2.ChainableUndefined)
        self._env.globals.update(state_attr=self._state_attr, is_state=self._is_state, states=self._states)
        self._handlers: dict[str, Callable[[Intent, list[Entity]], None]] = {
            "HassTurnOn": lambda i, ts: self._switch(ts, on=True),
            "HassTurnOff": lambda i, ts: self._switch(ts, on=False),
            "HassToggle": self._toggle,
            "HassLightSet": self._light_set,
            "HassClimateSetTemperature": lambda i, ts: _set_attr(ts, "temperature", i.slots.get("temperature")),
            "HassClimateSetFanMode": lambda i, ts: _set_attr(ts, "fan_mode", i.slots.get("fan_mode")),
            "HassSetPosition": self._position,
            "HassFanSetSpeed": self._fan_speed,
            "HassMediaPause": lambda i, ts: _set_state(ts, "paused"),
            "HassMediaUnpause": lambda i, ts: _set_state(ts, "playing"),
            "HassMediaNext": lambda i, ts: _step_track(ts, 1),
            "HassMediaPrevious": lambda i, ts: _step_track(ts, -1),
            "HassSetVolume": lambda i, ts: _set_attr(ts, "volume_level", _volume(i.slots.get("volume_level"))),
            "HassSetVolumeRelative": self._volume_step,
            "HassMediaPlayerMute": lambda i, ts: _set_attr(ts, "is_volume_muted", True),
            "HassMediaPlayerUnmute": lambda i, ts: _set_attr(ts, "is_volume_muted", False),
            "HassMediaSearchAndPlay": self._play,
            "HassListAddItem": self._list_add,
            "HassShoppingListAddItem": self._list_add,
            "HassListCompleteItem": self._list_complete,
            "HassShoppingListCompleteItem": self._list_complete,
            "HassListRemoveItem": self._list_remove,
            "HassVacuumStart": lambda i, ts: _set_state(ts, "cleaning"),
            "HassVacuumReturnToBase": lambda i, ts: _set_state(ts, "returning"),
            "HassVacuumCleanArea": lambda i, ts: _set_state(ts, "cleaning"),
            "HassLawnMowerStartMowing": lambda i, ts: _set_state(ts, "mowing"),
            "HassLawnMowerDock": lambda i, ts: _set_state(ts, "docked"),
        }
        self._speech: dict[str, Any] = {}

    # -- template helpers -------------------------------------------------------------------
    def _state_attr(self, entity_id: str, attr: str) -> Any:
        entity = self.catalog.get(entity_id)
        return entity.attributes.get(attr) if entity is not None else None

    def _is_state(self, entity_id: str, state: str) -> bool:
        entity = self.catalog.get(entity_id)
        return entity is not None and entity.state == state

    def _states(self, entity_id: str) -> str:
        entity = self.catalog.get(entity_id)
        return entity.state if entity is not None else "unknown"

    # -- acting ---------------------------------------------------------------------------------
    def handle(self, intent: Intent, *, now: dt.datetime | None = None, apply: bool = True) -> Outcome:
        """Act on the intent (questions never change state) and say what happened.

        ``apply=False`` only renders the reply (a controller does the acting).
        """
        if intent.error:
            return Outcome(self._error(intent.error, intent.error_args), success=False)
        targets = [e for e in map(self.catalog.get, intent.targets) if e is not None]
        before = {e.entity_id: (e.state, repr(e.attributes)) for e in targets}
        self._speech = {}
        handler = self._handlers.get(intent.name)
        if apply and handler is not None:
            try:
                handler(intent, targets)
            except HandleError as err:
                return Outcome(str(err), success=False)
        changed = [e.entity_id for e in targets if (e.state, repr(e.attributes)) != before[e.entity_id]]
        matched, unmatched = targets, []
        if intent.name == "HassGetState" and intent.slots.get("state") is not None:
            wanted = str(intent.slots["state"])
            matched = [e for e in targets if e.state == wanted]
            unmatched = [e for e in targets if e.state != wanted]
        first = next(iter(matched or unmatched or targets), None)
        slots = _Obj({**intent.slot_texts, **self._speech})
        if intent.name == "HassGetCurrentTime":
            slots["time"] = (now or dt.datetime.now()).time()
        if intent.name == "HassGetCurrentDate":
            slots["date"] = (now or dt.datetime.now()).date()
        if intent.name == "HassRespond":
            return Outcome(RESPOND.get(intent.response_key, ""), changed)
        variables = {
            "slots": slots,
            "state": state_obj(first) if first is not None else None,
            "query": _Obj(matched=[state_obj(e) for e in matched], unmatched=[state_obj(e) for e in unmatched]),
        }
        return Outcome(self._render(intent.name, intent.response_key, variables), changed)

    def _switch(self, targets: list[Entity], *, on: bool) -> None:
        for e in targets:
            if e.domain in TRIGGERED:
                if not on:
                    raise HandleError(f"Sorry, {e.name} cannot be turned off")
                e.attributes["last_triggered"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
                continue
            e.state = (ON_STATE if on else OFF_STATE).get(e.domain, "on" if on else "off")
            if e.domain in ("cover", "valve"):
                e.attributes["current_position"] = 100 if on else 0

    def _toggle(self, intent: Intent, targets: list[Entity]) -> None:
        for e in targets:
            if e.domain in TOGGLE_DOMAINS:
                e.state = "off" if e.state == "on" else "on"

    def _light_set(self, intent: Intent, targets: list[Entity]) -> None:
        slots = intent.slots
        for e in targets:
            if "brightness" in slots:
                pct = max(0, min(100, int(slots["brightness"])))
                e.attributes["brightness"] = round(pct * BRIGHTNESS_MAX / 100)
                e.state = "on" if pct > 0 else "off"
            if "color" in slots:
                e.attributes["color_name"] = str(slots["color"])
                e.state = "on"
            if "temperature" in slots:
                e.attributes["color_temp_kelvin"] = slots["temperature"]
                e.state = "on"

    def _position(self, intent: Intent, targets: list[Entity]) -> None:
        pos = max(0, min(100, int(intent.slots.get("position", 0))))
        for e in targets:
            e.attributes["current_position"] = pos
            e.state = "open" if pos > 0 else "closed"

    def _fan_speed(self, intent: Intent, targets: list[Entity]) -> None:
        pct = max(0, min(100, int(intent.slots.get("percentage", 0))))
        for e in targets:
            e.attributes["percentage"] = pct
            e.state = "on" if pct > 0 else "off"

    def _volume_step(self, intent: Intent, targets: list[Entity]) -> None:
        step = intent.slots.get("volume_step")
        delta = VOLUME_STEP if step == "up" else -VOLUME_STEP if step == "down" else _volume(step) or 0.0
        for e in targets:
            level = float(e.attributes.get("volume_level", 0.5))
            e.attributes["volume_level"] = round(max(0.0, min(1.0, level + delta)), 2)

    def _play(self, intent: Intent, targets: list[Entity]) -> None:
        query = str(intent.slots.get("search_query", "")).strip()
        for e in targets[:1]:  # one player plays it
            e.state = "playing"
            e.attributes["media_title"] = query
            if intent.slots.get("media_class"):
                e.attributes["media_content_type"] = intent.slots["media_class"]
        self._speech["media"] = _Obj(title=query) if targets and query else None

    # -- lists ------------------------------------------------------------------------------
    @staticmethod
    def _items(todo: Entity) -> list[dict[str, Any]]:
        items = todo.attributes.setdefault("items", [])
        if not isinstance(items, list):
            items = todo.attributes["items"] = []
        return items

    def _list_add(self, intent: Intent, targets: list[Entity]) -> None:
        item = str(intent.slots.get("item", "")).strip()
        if not item:
            raise HandleError("Sorry, what should I add?")
        for todo in targets[:1]:
            self._items(todo).append({"summary": item, "status": "needs_action"})
            _count(todo)

    def _find(self, intent: Intent, targets: list[Entity]) -> tuple[Entity, dict[str, Any]]:
        item = str(intent.slots.get("item", "")).strip().casefold()
        for todo in targets:
            for entry in self._items(todo):
                if str(entry.get("summary", "")).casefold() == item:
                    return todo, entry
        where = targets[0].name if targets else "the list"
        raise HandleError(f"Sorry, {intent.slot_texts.get('item', item)} is not on {where}")

    def _list_complete(self, intent: Intent, targets: list[Entity]) -> None:
        todo, entry = self._find(intent, targets)
        entry["status"] = "completed"
        _count(todo)

    def _list_remove(self, intent: Intent, targets: list[Entity]) -> None:
        todo, entry = self._find(intent, targets)
        self._items(todo).remove(entry)
        _count(todo)

    # -- replies --------------------------------------------------------------------------------
    def _render(self, intent_name: str, key: str, variables: dict[str, Any]) -> str:
        templates = self.responses.get("intents", {}).get(intent_name, {})
        template = templates.get(key, templates.get("default", ""))
        return self.render(template, variables)

    def _error(self, key: str, args: dict[str, Any]) -> str:
        errors = self.responses.get("errors", {})
        return self.render(errors.get(key) or errors.get("handle_error", "Sorry, that did not work"), args)

    def fixed_replies(self) -> list[str]:
        """The replies that depend on nothing said and on no state (for the voice to make ahead).

        A template without variables ("Opening", "Timer paused", an error without names),
        and one whose only variable is the target's domain ("Turned on the light"), for each
        domain of the home. Rendered as :meth:`handle` renders them.
        """
        templates = [t for name, body in self.responses.get("intents", {}).items() if name != "HassRespond"
                     for t in body.values()]  # the hub answers HassRespond as itself (``RESPOND``)
        templates += [*RESPOND.values(), *self.responses.get("errors", {}).values()]
        return list(_fixed_texts(tuple(map(str, templates)), tuple(sorted({e.domain for e in self.catalog}))))

    def render(self, template: str, variables: dict[str, Any]) -> str:
        """A response template rendered, white space normalised ("Done" if it fails)."""
        try:
            text = self._env.from_string(template).render(**variables)
        except (jinja2.TemplateError, TypeError, ValueError, KeyError) as err:
            _LOGGER.warning("response template failed: %s", err)
            return "Done"
        return _spoken(text)


def _spoken(text: str) -> str:
    """A rendered reply with its white space normalised (templates span lines)."""
    return " ".join(text.split())


def _set_state(targets: list[Entity], state: str) -> None:
    for e in targets:
        e.state = state


def _set_attr(targets: list[Entity], attr: str, value: Any) -> None:
    if value is None:
        raise HandleError("Sorry, I need a value for that")
    for e in targets:
        e.attributes[attr] = value


def _step_track(targets: list[Entity], step: int) -> None:
    for e in targets:
        e.attributes["media_track"] = int(e.attributes.get("media_track", 1)) + step
        e.state = "playing"


def _volume(value: Any) -> float | None:
    try:
        return max(0.0, min(1.0, float(value) / 100))
    except (TypeError, ValueError):
        return None


def _count(todo: Entity) -> None:
    """A to-do list's state is the number of items still to do (as Home Assistant's)."""
    items = todo.attributes.get("items", [])
    todo.state = str(sum(1 for i in items if i.get("status") != "completed"))


@functools.lru_cache(maxsize=8)  # the same templates for every version of the home (~100 ms to render)
def _fixed_texts(templates: tuple[str, ...], domains: tuple[str, ...]) -> tuple[str, ...]:
    env = jinja2.Environment(autoescape=False, undefined=jinja2.ChainableUndefined)
    out: dict[str, None] = {}
    for template in templates:
        try:
            names = jinja2.meta.find_undeclared_variables(env.parse(template))
            if not names:
                out[_spoken(env.from_string(template).render())] = None
            elif names == {"state"} and not _OTHER_THAN_DOMAIN.search(template):
                compiled = env.from_string(template)
                for domain in domains:
                    out[_spoken(compiled.render(state=_Obj(domain=domain)))] = None
        except jinja2.TemplateError:
            continue
    return tuple(text for text in out if text and "None" not in text.split())
