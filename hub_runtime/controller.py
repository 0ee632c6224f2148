"""Who carries out intents: the hub itself (standalone), or a controller over MQTT.

A controller (Home Assistant, through ``custom_components/duplex_hub``) announces itself
on ``<base>/controller``. While one is set, the hub recognises but does not act: it
publishes each intent and waits for the controller's ``intent/result`` with the same id,
which it speaks. A controller that does not answer in time gets a spoken apology; the
dialogue goes on.
"""

from __future__ import annotations

import asyncio
import logging

from .home import Outcome
from .protocol import Controller

_LOGGER = logging.getLogger(__name__)


def no_answer(controller: Controller) -> str:
    """What the hub says when the controller did not answer in time."""
    return f"Sorry, {controller.name} did not answer."


class Results:
    """Outcomes from a controller, matched to the waiting turn by intent id."""

    def __init__(self) -> None:
        """No turn is waiting."""
        self._pending: dict[str, asyncio.Future[Outcome]] = {}

    def expect(self, intent_id: str) -> None:
        """A turn will wait for this intent's outcome (call before publishing the intent)."""
        self._pending[intent_id] = asyncio.get_running_loop().create_future()

    async def wait(self, intent_id: str, controller: Controller) -> Outcome:
        """The outcome, or an apology after the controller's timeout."""
        future = self._pending.get(intent_id)
        if future is None:
            self.expect(intent_id)
            future = self._pending[intent_id]
        try:
            return await asyncio.wait_for(future, controller.timeout_s)
        except TimeoutError:
            _LOGGER.warning("%s did not answer intent %s in %.1f s", controller.name, intent_id,
                            controller.timeout_s)
            return Outcome(response=no_answer(controller), success=False)
        finally:
            self._pending.pop(intent_id, None)

    def resolve(self, intent_id: str, outcome: Outcome) -> bool:
        """Hand an outcome to its waiting turn; False when no turn waits for it."""
        future = self._pending.pop(intent_id, None)
        if future is None or future.done():
            return False
        future.set_result(outcome)
        return True

    @property
    def waiting(self) -> int:
        """Turns waiting now."""
        return len(self._pending)
