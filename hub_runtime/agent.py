"""The agent: the home's model (catalog, grammar, NLU) and who carries out intents.

One agent serves every dialogue loop of a home: it owns the catalog, the grammar and
the NLU built from them, and swaps them atomically when the catalog changes. It also
knows who carries out intents: the hub itself, or a controller (``controller.py``).
Turning text into a reply is :mod:`.understanding`'s job.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
from typing import Any

from .catalog import Catalog
from .controller import Results
from .grammar import HomeGrammar
from .home import Home, Outcome
from .nlu import Intent, Nlu
from .protocol import Controller
from .settings import Settings

_LOGGER = logging.getLogger(__name__)


class HomeModel:
    """The grammar, NLU and standalone executor for one version of the catalog."""

    def __init__(self, catalog: Catalog, settings: Settings) -> None:
        """Build everything that depends on the catalog's names."""
        self.catalog = catalog
        self.grammar = HomeGrammar(catalog, language=settings.language,
                                   site_area=settings.site_area)
        self.nlu = Nlu(self.grammar, catalog)
        self.home = Home(catalog, self.grammar)


class Agent:
    """The current home model, and whether intents are carried out here or by a controller."""

    def __init__(self, model: HomeModel) -> None:
        """Start with this home model, standalone (no controller)."""
        self.model = model
        self.controller: Controller | None = None
        self.results = Results()

    @classmethod
    def from_settings(cls, settings: Settings) -> Agent:
        """Load the configured (or bundled) catalog and build the model."""
        from .settings import DEFAULT_CATALOG

        catalog = Catalog.load(settings.catalog or DEFAULT_CATALOG)
        return cls(HomeModel(catalog, settings))

    def recognize(self, text: str) -> Intent | None:
        """The grammar intent for the text, without acting."""
        return self.model.nlu.recognize(text)

    def expect(self, intent_id: str) -> None:
        """Before an intent is published: a turn will :meth:`act` on it."""
        if self.controller is not None:
            self.results.expect(intent_id)

    async def act(self, intent: Intent, *, intent_id: str, delegate: bool = False,
                  now: dt.datetime | None = None) -> Outcome:
        """Carry out an intent: here when standalone, else wait for the controller's result.

        ``delegate``: whoever asked executes it (an ``ask`` answered to a controller), so
        with a controller the hub only renders its reply.
        """
        if self.controller is None or intent.error is not None:
            return self.model.home.handle(intent, now=now)
        own = self.model.home.handle(intent, now=now, apply=False)
        if delegate:
            return own
        result = await self.results.wait(intent_id, self.controller)
        if result.success and not result.response:  # the controller did it and had nothing to say
            return dataclasses.replace(result, response=own.response)
        return result

    def update_states(self, catalog: Catalog) -> bool:
        """Take the states of a catalog with the same names; False when the names differ."""
        current = self.model.catalog
        if catalog.signature() != current.signature():
            return False
        for entity in catalog:
            mine = current.get(entity.entity_id)
            assert mine is not None
            mine.state, mine.attributes = entity.state, entity.attributes
        return True

    def apply_states(self, states: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
        """New states and attributes of known entities; the ids that are not in the catalog."""
        unknown = []
        for entity_id, (state, attributes) in states.items():
            entity = self.model.catalog.get(entity_id)
            if entity is None:
                unknown.append(entity_id)
            else:
                entity.state, entity.attributes = state, dict(attributes)
        return unknown

    async def replace_catalog(self, catalog: Catalog, settings: Settings) -> None:
        """Rebuild grammar and NLU for a new catalog off the loop, then swap atomically."""
        model = await asyncio.to_thread(HomeModel, catalog, settings)
        self.model = model

    async def set_catalog(self, catalog: Catalog, settings: Settings) -> bool:
        """Take a new catalog: only its states when the names are the same; True when rebuilt."""
        if self.update_states(catalog):
            return False
        await self.replace_catalog(catalog, settings)
        return True
