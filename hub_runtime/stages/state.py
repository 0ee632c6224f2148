"""The state one dialogue loop shares between its stages.

Written by one owner each: ``replying`` by the router (set) and the output (cleared);
``spoken`` (what was actually played) by the output;
the session by the wake-word and turn stages. Everyone else only reads.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


class Activity(enum.Enum):
    """What the hub is doing, as published to other devices."""

    IDLE = "idle"
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"


class SpokenLog:
    """What the speaker actually played, sentence by sentence (written by the output stage)."""

    def __init__(self, keep: int = 256) -> None:
        """Remember the last ``keep`` sentences."""
        self._items: deque[tuple[int, str]] = deque(maxlen=keep)
        self.count = 0

    def add(self, text: str) -> None:
        """One sentence (or the part of one) was played."""
        if text.strip():
            self._items.append((self.count, text.strip()))
            self.count += 1

    def since(self, mark: int) -> str:
        """Everything played from ``mark`` on."""
        return " ".join(t for i, t in self._items if i >= mark)


@dataclass
class DialogueState:
    """Flags of one loop."""

    wake_word: bool = False  # whether a session must be opened by the wake word
    session_timeout_ms: int = 8000
    replying: bool = False  # a reply is being synthesised or played
    session_until_ms: int = -1  # the session closes then (wake word mode)
    on_activity: Callable[[Activity], None] | None = field(default=None, repr=False)
    spoken: SpokenLog = field(default_factory=SpokenLog, repr=False)  # written by the output
    _activity: Activity = field(default=Activity.IDLE, repr=False)

    @property
    def activity(self) -> Activity:
        """What the hub is doing; a change is reported to ``on_activity``."""
        return self._activity

    @activity.setter
    def activity(self, value: Activity) -> None:
        if value is not self._activity:
            self._activity = value
            if self.on_activity is not None:
                self.on_activity(value)

    def open_session(self, now_ms: int) -> None:
        """The wake word was heard."""
        self.session_until_ms = now_ms + self.session_timeout_ms

    def extend_session(self, now_ms: int) -> None:
        """The hub replied: the user may answer without the wake word."""
        if self.session_until_ms >= 0:
            self.session_until_ms = max(self.session_until_ms, now_ms + self.session_timeout_ms)

    def end_session(self) -> None:
        """Close the session now (MQTT ``session/end``)."""
        if self.wake_word:
            self.session_until_ms = -1

    def in_session(self, now_ms: int) -> bool:
        """Whether speech is addressed to the hub now."""
        return not self.wake_word or now_ms <= self.session_until_ms
