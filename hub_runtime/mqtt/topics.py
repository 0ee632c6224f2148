"""Topic names (see docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ROOT: Final = "duplex_hub"

# inbound command topics, relative to the base topic
SAY: Final = "say"
ASK: Final = "ask"
MUTE: Final = "mute"
UNMUTE: Final = "unmute"
SESSION_START: Final = "session/start"
SESSION_END: Final = "session/end"
VOLUME: Final = "volume"
CATALOG: Final = "catalog"
INTENT_RESULT: Final = "intent/result"
CONTROLLER: Final = "controller"
COMMANDS: Final = (SAY, ASK, MUTE, UNMUTE, SESSION_START, SESSION_END, VOLUME, CATALOG, INTENT_RESULT,
                   CONTROLLER)

# Hermes (Rhasspy / Snips)
HERMES_TTS_SAY: Final = "hermes/tts/say"
HERMES_END_SESSION: Final = "hermes/dialogueManager/endSession"
HERMES_CONTINUE_SESSION: Final = "hermes/dialogueManager/continueSession"
HERMES_NLU_QUERY: Final = "hermes/nlu/query"
HERMES_IN: Final = (HERMES_TTS_SAY, HERMES_END_SESSION, HERMES_CONTINUE_SESSION, HERMES_NLU_QUERY)
HERMES_SESSION_STARTED: Final = "hermes/dialogueManager/sessionStarted"
HERMES_SESSION_ENDED: Final = "hermes/dialogueManager/sessionEnded"
HERMES_NOT_RECOGNIZED: Final = "hermes/nlu/intentNotRecognized"


def hermes_intent(name: str) -> str:
    """The Hermes topic of one intent."""
    return f"hermes/intent/{name}"


@dataclass(frozen=True)
class Topics:
    """The topics of one hub."""

    hub_id: str

    @property
    def base(self) -> str:
        """``duplex_hub/<hub_id>``."""
        return f"{ROOT}/{self.hub_id}"

    def __call__(self, relative: str) -> str:
        """A topic under the base."""
        return f"{self.base}/{relative}"

    @property
    def discovery(self) -> str:
        """The retained announcement Home Assistant discovers."""
        return f"{ROOT}/discovery/{self.hub_id}"

    @property
    def availability(self) -> str:
        """Retained ``online`` / ``offline`` (the last will)."""
        return self("availability")

    @property
    def intent(self) -> str:
        """Every recognised intent (QoS 1, through the outbox)."""
        return self("intent")

    @property
    def state(self) -> str:
        """Retained dialogue state."""
        return self("state")

    @property
    def response(self) -> str:
        """Replies to ``ask``."""
        return self("ask/response")

    def event(self, kind: str) -> str:
        """A dialogue event for other devices."""
        return self(f"event/{kind}")

    def command(self, topic: str) -> str | None:
        """The relative command name of an inbound topic under this base, else None."""
        prefix = self.base + "/"
        if topic.startswith(prefix) and topic[len(prefix):] in COMMANDS:
            return topic[len(prefix):]
        return None
