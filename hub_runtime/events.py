"""Dialogue events, derived from frames in one place.

:class:`EventObserver` watches every frame a loop sends and turns those that other
devices care about into the typed events of :mod:`.protocol`, each once, stamped with
the loop's clock. The same events are the lines of ``hub-runtime run --events``, go out
over MQTT (``<base>/event/<type>``, ``<base>/intent``, ``<base>/state``) and are what
the tests read. No stage emits an event by hand.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, TextIO

from . import protocol as p
from .frames import (
    ArbitrationFrame,
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndOfTurnFrame,
    ErrorFrame,
    Frame,
    IntentFrame,
    PartialTranscriptFrame,
    PlaybackCancelledFrame,
    PlaybackPausedFrame,
    PlaybackResumedFrame,
    ResponseFrame,
    SpeechStartedFrame,
    SpeechStoppedFrame,
    TimerFrame,
    TranscriptFrame,
    WakeWordFrame,
)
from .pipeline import Clock, Direction, Seen, Stage

EventSink = Callable[[p.Event], None]


def _transcript(f: TranscriptFrame) -> p.Event:
    return p.Transcript(text=f.text, tier=f.tier, confidence=round(f.confidence, 3),
                        open_text=f.open_text if f.open_text and f.open_text != f.text else None,
                        grammar_text=f.grammar_text,
                        grammar_confidence=None if f.grammar_confidence is None else round(f.grammar_confidence, 3),
                        unsure=True if f.unsure else None)


def _intent(f: IntentFrame) -> p.Event:
    i = f.intent
    return p.IntentRecognized(id=f.intent_id, name=i.name, slots=dict(i.slots), targets=tuple(i.targets),
                              source=f.source, text=f.text, confidence=round(f.confidence, 3), error=i.error,
                              call=f.call)


# frame type -> its event (frames not listed here are not events)
CONVERTERS: dict[type[Frame], Callable[[Any], p.Event]] = {
    SpeechStartedFrame: lambda f: p.SpeechStart(onset_ms=f.onset_ms),
    SpeechStoppedFrame: lambda f: p.SpeechEnd(offset_ms=f.offset_ms),
    PartialTranscriptFrame: lambda f: p.Partial(text=f.text, complete=f.complete),
    EndOfTurnFrame: lambda f: p.EndOfTurn(silence_ms=f.silence_ms, discard=f.discard),
    TranscriptFrame: _transcript,
    IntentFrame: _intent,
    ResponseFrame: lambda f: p.Response(text=f.text, source=f.source, expects_reply=f.expects_reply),
    BotStartedSpeakingFrame: lambda f: p.TtsStart(utterance=f.utterance),
    BotStoppedSpeakingFrame: lambda f: p.TtsEnd(utterance=f.utterance, text=f.text),
    PlaybackPausedFrame: lambda f: p.BargeIn(onset_ms=f.onset_ms, playing=f.playing),
    PlaybackResumedFrame: lambda f: p.TtsResumed(),
    PlaybackCancelledFrame: lambda f: p.TtsCancelled(played_ms=f.played_ms),
    WakeWordFrame: lambda f: p.WakeWordDetected(name=f.name),
    TimerFrame: lambda f: p.TimerEvent(action=f.action, id=f.timer_id, seconds_left=f.seconds_left, name=f.name,
                                       area=f.area),
    ErrorFrame: lambda f: p.ErrorEvent(message=f.message),
    ArbitrationFrame: lambda f: p.Arbitration(winner=f.winner, answered=f.answered, candidates=tuple(
        p.Candidate(site=site, level_db=level, text=text) for site, level, text in f.candidates)),
}


class EventObserver:
    """Turns frames into events, once each, at the loop's time."""

    def __init__(self, clock: Clock, sink: EventSink) -> None:
        """Send the events to ``sink``."""
        self.clock = clock
        self.sink = sink
        self._seen = Seen()

    def on_frame(self, source: Stage | None, frame: Frame, direction: Direction) -> None:
        """Derive the frame's event the first time it is sent."""
        convert = CONVERTERS.get(type(frame))
        if convert is not None and self._seen.first(frame):
            self.sink(dataclasses.replace(convert(frame), t_ms=self.clock.now_ms()))


class EventLog:
    """Collects events (typed and as their JSON objects), writes JSON lines, calls listeners."""

    def __init__(self, stream: TextIO | None = None, listener: EventSink | None = None, *,
                 keep: bool = True) -> None:
        """Write to ``stream`` (if any) and call ``listener`` per event; ``keep`` them (not live: months)."""
        self.keep = keep
        self.items: list[p.Event] = []
        self.events: list[dict[str, Any]] = []  # the same, as the JSON objects of the contract
        self._stream = stream
        self.listeners: list[EventSink] = [listener] if listener else []

    def __call__(self, event: p.Event) -> None:
        """Record one event."""
        data = event.to_dict()
        if self.keep:
            self.items.append(event)
            self.events.append(data)
        if self._stream is not None:
            self._stream.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
            self._stream.flush()
        for listener in self.listeners:
            listener(event)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """The events of one type, as JSON objects."""
        return [e for e in self.events if e["type"] == kind]
