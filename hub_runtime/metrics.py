"""What the hub measures about itself, from its events: Prometheus metrics and the recent turns.

:class:`Metrics` listens to the dialogue events (``events.py``) and keeps:

- per-stage turn latency histograms, measured from the end of the user's speech (the
  turn stage's ``end_of_turn`` less the silence it waited, ``silence_ms``; the VAD's own
  ``speech_end`` often comes later, after the reply started): ``end_of_turn``,
  ``transcript``, ``intent``, ``response`` and ``first_audio`` (``tts_start``); the same
  figures for the last turns, for the dashboard (typed turns there too, measured from
  the text's arrival);
- turns by how they were understood (grammar, llm, none), barge-ins by outcome
  (``resumed``: a backchannel, the hub talked on; ``cancelled``: the user took the turn),
  errors, wake words;
- the dialogue state, the loop's ticks and late ticks, the event loop's lag, whether MQTT
  is connected, which component runs on its fallback (``degraded``: the voice on
  espeak-ng when Piper fails), and the process's CPU and memory (``process_*``, Linux).

``/metrics`` (``http.py``) serves :attr:`Metrics.registry` in Prometheus' text format.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, ProcessCollector

from . import protocol as p

RECENT_TURNS: Final = 30  # turns kept for the dashboard
# the turn stages, in order: the event that ends each one (measured from speech_end)
STAGES: Final = (("end_of_turn", "end_of_turn"), ("transcript", "transcript"), ("intent", "intent"),
                 ("response", "response"), ("first_audio", "tts_start"))
LATENCY_BUCKETS_S: Final = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8, 1.2, 2.0, 4.0, 8.0)


@dataclass
class Turn:
    """One user turn as the dashboard shows it."""

    t_ms: int  # the end of the user's speech (typed: the text's arrival), loop time
    typed: bool = False  # text from the dashboard: not in the speech latency histograms
    text: str = ""
    intent: str | None = None
    response: str = ""
    latency_ms: dict[str, int] = field(default_factory=dict)  # stage -> ms after speech_end

    def to_dict(self) -> dict[str, object]:
        """The JSON object of ``/api/status``."""
        return {"t_ms": self.t_ms, "typed": self.typed, "text": self.text, "intent": self.intent,
                "response": self.response, "latency_ms": dict(self.latency_ms)}


class Metrics:
    """Prometheus metrics and recent turns, updated from the loop's events (``on_event``)."""

    def __init__(self) -> None:
        """A registry of its own (several hubs may share a process in tests)."""
        r = self.registry = CollectorRegistry()
        self.latency = Histogram("duplex_hub_turn_latency_seconds",
                                 "Time from the end of the user's speech to each stage of the turn",
                                 ["stage"], buckets=LATENCY_BUCKETS_S, registry=r)
        self.turns = Counter("duplex_hub_turns", "User turns, by how they were understood", ["source"],
                             registry=r)
        self.barge_ins = Counter("duplex_hub_barge_ins", "Speech over the hub, by outcome", ["outcome"],
                                 registry=r)
        self.errors = Counter("duplex_hub_errors", "Errors reported by the stages", registry=r)
        self.wake_words = Counter("duplex_hub_wake_words", "Wake words heard", registry=r)
        self.ticks = Counter("duplex_hub_ticks", "Audio frames ticked", registry=r)
        self.late_ticks = Counter("duplex_hub_late_ticks", "Frames ticked more than stall_ms late", registry=r)
        self.loop_lag = Gauge("duplex_hub_event_loop_lag_seconds", "How late the event loop ran a timer",
                              registry=r)
        self.healthy = Gauge("duplex_hub_healthy", "1 while the loop ticks on time and nothing failed",
                             registry=r)
        self.degraded = Gauge("duplex_hub_degraded", "1 while a component runs on its fallback",
                              ["component"], registry=r)
        self.mqtt_connected = Gauge("duplex_hub_mqtt_connected", "1 while the MQTT link is up", registry=r)
        self.state = Enum("duplex_hub_dialogue_state", "What the hub is doing", states=list(p.DIALOGUE_STATES),
                          registry=r)
        ProcessCollector(registry=r)
        for stage, _ in STAGES:  # every series exists from the start, at zero
            self.latency.labels(stage)
        for source in ("grammar", "llm", "none"):
            self.turns.labels(source)
        for outcome in ("resumed", "cancelled"):
            self.barge_ins.labels(outcome)
        self.recent: deque[Turn] = deque(maxlen=RECENT_TURNS)
        self._turn: Turn | None = None
        self._paused = False

    def on_event(self, event: p.Event) -> None:
        """Account for one dialogue event."""
        kind = event.type
        if isinstance(event, p.EndOfTurn):
            self._turn = None if event.discard else Turn(t_ms=event.t_ms - event.silence_ms)
        elif isinstance(event, p.Transcript) and event.tier == "typed":
            self._turn = Turn(t_ms=event.t_ms, typed=True)
        elif isinstance(event, p.StateChanged):
            self.state.state(event.state)
        elif isinstance(event, p.ErrorEvent):
            self.errors.inc()
        elif isinstance(event, p.WakeWordDetected):
            self.wake_words.inc()
        elif isinstance(event, p.BargeIn):
            self._paused = True
        elif isinstance(event, p.TtsResumed | p.TtsCancelled) and self._paused:
            self._paused = False
            self.barge_ins.labels("resumed" if isinstance(event, p.TtsResumed) else "cancelled").inc()
        turn = self._turn
        if turn is None:
            return
        if isinstance(event, p.Transcript):
            turn.text = event.text
        elif isinstance(event, p.IntentRecognized):
            turn.intent = event.name
        elif isinstance(event, p.Response):
            turn.response = event.text
            self.turns.labels(event.source or "none").inc()
        for stage, ends_it in STAGES:
            if kind == ends_it and stage not in turn.latency_ms:
                ms = max(0, event.t_ms - turn.t_ms)
                turn.latency_ms[stage] = ms
                if not turn.typed:
                    self.latency.labels(stage).observe(ms / 1000)
        if kind == "response":
            self.recent.append(turn)
        if kind == "tts_start" or (isinstance(event, p.Response) and not event.text):
            self._turn = None  # the turn is answered (or nothing will be said)

    def snapshot(self) -> list[dict[str, object]]:
        """The recent turns, oldest first."""
        return [t.to_dict() for t in self.recent]
