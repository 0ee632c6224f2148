"""The home catalog: entities, areas, aliases and their live state.

The file format (a contract) is::

    entities:
      - entity_id: light.kitchen
        name: Kitchen Light
        area: Kitchen
        aliases: [ceiling light]
        state: "off"
        attributes: {brightness: 0}

In standalone mode the hub applies intents to this catalog in memory.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import voluptuous as vol
import yaml

from .settings import describe_invalid

ENTITY_ID_RE: Final = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z0-9_]+$")

DEFAULT_STATE: Final[dict[str, str]] = {
    "light": "off",
    "switch": "off",
    "fan": "off",
    "cover": "closed",
    "climate": "off",
    "lock": "locked",
    "media_player": "off",
    "sensor": "unknown",
    "binary_sensor": "off",
}


class CatalogError(ValueError):
    """A catalog that cannot be used; the message names the entry and the reason."""


def _entity_id(value: Any) -> str:
    if not isinstance(value, str) or not ENTITY_ID_RE.match(value):
        raise vol.Invalid(f"{value!r} is not an entity id like light.kitchen")
    return value


ENTITY_SCHEMA: Final = vol.Schema(
    {
        vol.Required("entity_id"): _entity_id,
        vol.Required("name"): vol.All(str, vol.Length(min=1)),
        vol.Optional("area"): vol.Any(None, str),
        vol.Optional("aliases", default=list): [str],
        vol.Optional("state"): vol.Any(None, vol.Coerce(str)),
        vol.Optional("attributes", default=dict): dict,
        vol.Optional("domain"): str,
    },
    extra=vol.REMOVE_EXTRA,
)
CATALOG_SCHEMA: Final = vol.Schema({vol.Required("entities"): [ENTITY_SCHEMA]}, extra=vol.ALLOW_EXTRA)


@dataclass
class Entity:
    """One device or sensor of the home, with its live state."""

    entity_id: str
    name: str
    area: str | None = None
    aliases: tuple[str, ...] = ()
    state: str = "unknown"
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def domain(self) -> str:
        """The entity's domain, the prefix of its id."""
        return self.entity_id.split(".", 1)[0]

    @property
    def names(self) -> tuple[str, ...]:
        """The name and every alias."""
        return (self.name, *self.aliases)

    @property
    def state_with_unit(self) -> str:
        """The state as a reply would speak it."""
        unit = self.attributes.get("unit_of_measurement")
        return f"{self.state} {unit}" if unit else self.state

    def to_dict(self) -> dict[str, Any]:
        """The entity in the catalog file format."""
        out: dict[str, Any] = {"entity_id": self.entity_id, "name": self.name}
        if self.area:
            out["area"] = self.area
        if self.aliases:
            out["aliases"] = list(self.aliases)
        out["state"] = self.state
        if self.attributes:
            out["attributes"] = copy.deepcopy(self.attributes)
        return out


class Catalog:
    """The home's entities; the single owner of their state in standalone mode."""

    def __init__(self, entities: Iterable[Entity] = ()) -> None:
        """Hold these entities, keyed by entity id."""
        self._entities: dict[str, Entity] = {}
        for entity in entities:
            if entity.entity_id in self._entities:
                raise CatalogError(f"entities: {entity.entity_id} appears twice")
            self._entities[entity.entity_id] = entity

    @classmethod
    def from_dict(cls, data: Any) -> Catalog:
        """Validate a parsed catalog document."""
        try:
            valid = CATALOG_SCHEMA(data)
        except vol.Invalid as err:
            raise CatalogError(describe_invalid(err, "catalog")) from None
        entities = []
        for item in valid["entities"]:
            domain = item["entity_id"].split(".", 1)[0]
            state = item.get("state")
            entities.append(
                Entity(
                    entity_id=item["entity_id"],
                    name=item["name"].strip(),
                    area=(item.get("area") or None),
                    aliases=tuple(a.strip() for a in item["aliases"] if a.strip()),
                    state=str(state) if state is not None else DEFAULT_STATE.get(domain, "unknown"),
                    attributes=dict(item["attributes"]),
                )
            )
        return cls(entities)

    @classmethod
    def load(cls, path: str | Path) -> Catalog:
        """Read and validate a catalog YAML file."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as err:
            raise CatalogError(f"catalog {path}: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise CatalogError(f"catalog {path}: not valid YAML ({err})") from None
        return cls.from_dict(data)

    def __iter__(self) -> Iterator[Entity]:
        """Iterate over the entities in file order."""
        return iter(self._entities.values())

    def __len__(self) -> int:
        """Count the entities."""
        return len(self._entities)

    def get(self, entity_id: str) -> Entity | None:
        """The entity with this id, if any."""
        return self._entities.get(entity_id)

    @property
    def areas(self) -> list[str]:
        """Every area named by an entity, in first-seen order."""
        seen: dict[str, None] = {}
        for entity in self:
            if entity.area:
                seen.setdefault(entity.area, None)
        return list(seen)

    @property
    def domains(self) -> set[str]:
        """Every domain present."""
        return {entity.domain for entity in self}

    def signature(self) -> tuple[Any, ...]:
        """What the grammar depends on (names, aliases, areas, domains), not the states."""
        return tuple((e.entity_id, e.name, e.area, e.aliases) for e in self)

    def to_dict(self) -> dict[str, Any]:
        """The catalog in its file format."""
        return {"entities": [e.to_dict() for e in self]}
