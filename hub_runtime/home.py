"""Acting on intents in standalone mode.

The catalog is changed in memory, and the reply comes from the intents' own response
templates (Jinja2, as Home Assistant renders them).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any, Final

import jinja2

from .catalog import Catalog, Entity
from .grammar import HomeGrammar
from .nlu import Intent

_LOGGER = logging.getLogger(__name__)

ON_STATE: Final = {"cover": "open", "lock": "locked", "climate": "heat"}
OFF_STATE: Final = {"cover": "closed", "lock": "unlocked", "climate": "off"}
BRIGHTNESS_MAX: Final = 255  # Home Assistant's scale for the brightness attribute


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


def _state_obj(entity: Entity) -> _Obj:
    return _Obj(
        entity_id=entity.entity_id, domain=entity.domain, name=entity.name,
        state=entity.state, state_with_unit=entity.state_with_unit,
        attributes=entity.attributes,
    )


class Home:
    """Applies intents to the in-memory catalog and renders the reply."""

    def __init__(self, catalog: Catalog, grammar: HomeGrammar) -> None:
        """Act on this catalog; take reply templates from this grammar's intents."""
        self.catalog = catalog
        self.responses: dict[str, Any] = grammar.document.get("responses", {})
        self._env = jinja2.Environment(autoescape=False, undefined=jinja2.ChainableUndefined)

    def handle(self, intent: Intent, *, now: dt.datetime | None = None, apply: bool = True) -> Outcome:
        """Act on the intent (state questions never change state) and say what happened.

        ``apply=False`` only renders the reply (a controller does the acting).
        """
        if intent.error:
            return Outcome(self._error(intent.error, intent.error_args), success=False)
        targets = [e for e in map(self.catalog.get, intent.targets) if e is not None]
        changed = self._apply(intent, targets) if apply else []
        variables: dict[str, Any] = {
            "slots": _Obj({k: v for k, v in intent.slots.items()}),
            "state": _state_obj(targets[0]) if targets else _Obj(),
            "query": _Obj(matched=[], unmatched=[]),
        }
        if intent.hassil_name == "HassGetState":
            wanted = intent.slots.get("state")
            matched = [e for e in targets if wanted is None or e.state == wanted]
            variables["query"] = _Obj(
                matched=[_state_obj(e) for e in matched],
                unmatched=[_state_obj(e) for e in targets if e not in matched],
            )
        if intent.hassil_name == "HassGetCurrentTime":
            variables["slots"]["time"] = (now or dt.datetime.now()).time()
        return Outcome(self._render(intent.hassil_name, intent.response_key, variables), changed)

    def _apply(self, intent: Intent, targets: list[Entity]) -> list[str]:
        name, slots = intent.hassil_name, intent.slots
        changed: list[str] = []
        for e in targets:
            before = (e.state, dict(e.attributes))
            if name == "HassTurnOn":
                e.state = ON_STATE.get(e.domain, "on")
                if e.domain == "cover":
                    e.attributes["current_position"] = 100
            elif name == "HassTurnOff":
                e.state = OFF_STATE.get(e.domain, "off")
                if e.domain == "cover":
                    e.attributes["current_position"] = 0
            elif name == "HassToggle":
                e.state = "off" if e.state == "on" else "on"
            elif name == "HassLightSet":
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
            elif name == "HassClimateSetTemperature" and "temperature" in slots:
                e.attributes["temperature"] = slots["temperature"]
            elif name == "HassSetPosition" and "position" in slots:
                pos = max(0, min(100, int(slots["position"])))
                e.attributes["current_position"] = pos
                e.state = "open" if pos > 0 else "closed"
            if (e.state, e.attributes) != before:
                changed.append(e.entity_id)
        return changed

    def _render(self, intent_name: str, key: str, variables: dict[str, Any]) -> str:
        templates = self.responses.get("intents", {}).get(intent_name, {})
        template = templates.get(key, templates.get("default", ""))
        return self._render_text(template, variables)

    def _error(self, key: str, args: dict[str, Any]) -> str:
        template = self.responses.get("errors", {}).get(key) or \
            self.responses.get("errors", {}).get("handle_error", "Sorry, that did not work")
        return self._render_text(template, args)

    def _render_text(self, template: str, variables: dict[str, Any]) -> str:
        try:
            text = self._env.from_string(template).render(**variables)
        except jinja2.TemplateError as err:
            _LOGGER.warning("response template failed: %s", err)
            return "Done"
        return " ".join(text.split())
