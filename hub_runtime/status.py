"""What the hub is doing, derived from frames by one owner.

:class:`DialogueTracker` observes a loop's frames and owns two facts, which nothing else
writes:

* ``state`` — idle, listening (the user speaks), thinking (a turn ended, the reply is
  being made), speaking (the speaker plays the reply); each change is a ``state`` event;
* ``replying`` — a reply is being made or played: from the end of a turn (or the first
  text to say) until every reply text was played to its end, or an interruption dropped
  it. The turn stage reads it to tell a barge-in from a new turn.
"""

from __future__ import annotations

from .events import EventSink
from .frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndOfTurnFrame,
    Frame,
    InterruptionFrame,
    ResponseFrame,
    SpeakFrame,
    SpeechStartedFrame,
    TranscriptFrame,
)
from .pipeline import Clock, Direction, Seen, Stage
from .protocol import StateChanged

IDLE, LISTENING, THINKING, SPEAKING = "idle", "listening", "thinking", "speaking"


class DialogueTracker:
    """The one owner of the dialogue state and of "a reply is in progress"."""

    def __init__(self, clock: Clock, sink: EventSink) -> None:
        """Idle; report changes to ``sink``."""
        self.clock = clock
        self.sink = sink
        self.state = IDLE
        self._making = False  # a turn ended and its reply is being made
        self.asking = False  # the reply in progress asks the user something
        self._unplayed = 0  # reply texts sent to the voice and not yet played to the end
        self._seen = Seen()

    @property
    def replying(self) -> bool:
        """A reply is being made, synthesised or played."""
        return self._making or self._unplayed > 0

    def on_frame(self, source: Stage | None, frame: Frame, direction: Direction) -> None:
        """Follow the frames that change what the hub is doing."""
        if not isinstance(frame, _TRACKED) or not self._seen.first(frame):
            return
        if isinstance(frame, SpeakFrame):
            self._unplayed += 1  # each becomes one utterance, which ends with BotStoppedSpeaking
        elif isinstance(frame, SpeechStartedFrame):
            self._quiet_becomes(LISTENING)
        elif isinstance(frame, TranscriptFrame) and not frame.paused:  # (paused: the router decides first)
            self.asking = False
            if frame.text:
                self._making = True
                self._set(THINKING)
            else:
                self._quiet_becomes(IDLE)
        elif isinstance(frame, EndOfTurnFrame):
            if frame.discard:
                self._quiet_becomes(IDLE)
        elif isinstance(frame, ResponseFrame):
            self._making = False
            self.asking = frame.expects_reply
            self._quiet_becomes(IDLE)  # nothing to say; with a reply, speaking follows
        elif isinstance(frame, BotStartedSpeakingFrame):
            self._set(SPEAKING)
        elif isinstance(frame, BotStoppedSpeakingFrame):
            self._unplayed = max(0, self._unplayed - 1)
            if not self._unplayed:
                self._set(THINKING if self._making else IDLE)
        elif isinstance(frame, InterruptionFrame):
            self._making, self._unplayed = False, 0
            self._set(LISTENING)

    def _quiet_becomes(self, state: str) -> None:
        """Change the state unless a reply is in progress (it keeps its own state)."""
        if not self.replying:
            self._set(state)

    def _set(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.sink(StateChanged(state=state, t_ms=self.clock.now_ms()))


_TRACKED = (SpeakFrame, SpeechStartedFrame, TranscriptFrame, EndOfTurnFrame, ResponseFrame,
            BotStartedSpeakingFrame, BotStoppedSpeakingFrame, InterruptionFrame)
