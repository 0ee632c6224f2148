"""Timers: the hub keeps them itself, on the loop's clock, as Home Assistant's satellites do.

The timer intents (start, cancel, cancel all, add or take away time, pause, resume,
status) are matched and answered as Home Assistant's timer handlers do: a timer is found
by its name, its room or the duration it was set for; the status reply gets the same
rounded figures. Time is the loop's clock, so a timer set while a file is processed fast
ends at the right place in the file. A finished timer is announced (with a chime) once
the hub is free; an announcement cut short by a barge-in is made again, a few times at
most. Every change is reported (``on_change``), and so becomes a ``timer`` event.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .nlu import Intent

_LOGGER = logging.getLogger(__name__)

MAX_ANNOUNCEMENTS: Final = 3  # a finished timer is announced again after a barge-in, this many times at most
_ids = itertools.count(1)


class TimerError(Exception):
    """No timer (``timer_not_found``) or several (``multiple_timers_matched``) match a request."""

    def __init__(self, key: str, candidates: list[Timer] | None = None) -> None:
        """A response error key of Home Assistant's, and the timers that matched."""
        super().__init__(key)
        self.key = key
        self.candidates = candidates or []


@dataclass
class Timer:
    """One timer (times in ms on the loop's clock)."""

    id: str
    seconds: int  # left when it was last updated
    updated_ms: int
    name: str | None = None
    area: str | None = None
    start_hours: int | None = None
    start_minutes: int | None = None
    start_seconds: int | None = None
    is_active: bool = True
    announced: int = 0  # times its end was announced

    def seconds_left(self, now_ms: int) -> int:
        """Seconds to go."""
        if not self.is_active:
            return self.seconds
        return max(0, self.seconds - (now_ms - self.updated_ms) // 1000)

    def ends_ms(self) -> int:
        """When it ends, if it keeps running."""
        return self.updated_ms + self.seconds * 1000

    def describe(self) -> str:
        """``the pasta timer``, ``the 5 minute timer``."""
        if self.name:
            return f"the {self.name} timer"
        parts = [f"{v} {unit}" for v, unit in ((self.start_hours, "hour"), (self.start_minutes, "minute"),
                                               (self.start_seconds, "second")) if v]
        return f"the {' '.join(parts)} timer" if parts else "the timer"

    def info(self, now_ms: int) -> dict[str, Any]:
        """What Home Assistant's status reply gets about a timer."""
        total = self.seconds_left(now_ms)
        minutes, seconds = divmod(total, 60)
        hours, minutes = divmod(minutes, 60)
        rh, rm, rs = round_time(hours, minutes, seconds)
        return {"id": self.id, "name": self.name or "", "area": self.area or "", "is_active": self.is_active,
                "start_hours": self.start_hours or 0, "start_minutes": self.start_minutes or 0,
                "start_seconds": self.start_seconds or 0, "hours_left": hours, "minutes_left": minutes,
                "seconds_left": seconds, "rounded_hours_left": rh, "rounded_minutes_left": rm,
                "rounded_seconds_left": rs, "total_seconds_left": total}


def round_time(hours: int, minutes: int, seconds: int) -> tuple[int, int, int]:
    """Lower precision for a spoken status, exactly as Home Assistant rounds."""
    if hours > 0:
        if minutes > 45:
            return hours + 1, 0, 0
        return hours, 0 if minutes < 15 else 30, 0
    if minutes > 0:
        if seconds > 45:
            return 0, minutes + 1, 0
        return 0, minutes, 0 if seconds < 15 else 30
    if seconds > 50:
        return 0, 1, 0
    return 0, 0, seconds if seconds < 10 else seconds - seconds % 10


def _int(slots: dict[str, Any], key: str) -> int | None:
    value = slots.get(key)
    try:
        return int(float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _total_seconds(slots: dict[str, Any]) -> int:
    return (_int(slots, "hours") or 0) * 3600 + (_int(slots, "minutes") or 0) * 60 + (_int(slots, "seconds") or 0)


@dataclass
class TimerChange:
    """What changed: ``started``, ``updated``, ``paused``, ``resumed``, ``cancelled`` or ``finished``."""

    action: str
    timer: Timer
    seconds_left: int


@dataclass
class Timers:
    """The timers of one room, on the loop's clock."""

    now_ms: Callable[[], int]
    area: str | None = None  # the room the hub is in
    on_change: Callable[[TimerChange], None] = lambda change: None
    timers: dict[str, Timer] = field(default_factory=dict)
    finished: list[Timer] = field(default_factory=list)  # waiting to be announced

    def _report(self, action: str, timer: Timer) -> None:
        self.on_change(TimerChange(action, timer, timer.seconds_left(self.now_ms())))

    # -- intents --------------------------------------------------------------------------
    def handle(self, intent: Intent) -> dict[str, Any]:
        """Carry out a timer intent; the reply's extra slots. Raises TimerError."""
        slots, now = intent.slots, self.now_ms()
        name = intent.name
        if name == "HassStartTimer":
            seconds = _total_seconds(slots)
            if seconds <= 0:
                raise TimerError("timer_not_found")
            timer = Timer(id=f"t{next(_ids)}", seconds=seconds, updated_ms=now,
                          name=str(slots["name"]).strip() if slots.get("name") else None, area=self.area,
                          start_hours=_int(slots, "hours"), start_minutes=_int(slots, "minutes"),
                          start_seconds=_int(slots, "seconds"))
            self.timers[timer.id] = timer
            self._report("started", timer)
            return {}
        if name == "HassCancelAllTimers":
            cancelled = [t for t in self.timers.values() if slots.get("area") in (None, t.area)]
            for timer in cancelled:
                self._cancel(timer)
            return {"canceled": len(cancelled)}
        if name == "HassTimerStatus":
            return {"timers": [t.info(now) for t in self.find_all(slots)]}
        timer = self.find(slots, only_active={"HassPauseTimer": True, "HassUnpauseTimer": False}.get(name))
        if name == "HassCancelTimer":
            self._cancel(timer)
        elif name in ("HassIncreaseTimer", "HassDecreaseTimer"):
            sign = 1 if name == "HassIncreaseTimer" else -1
            timer.seconds = max(0, timer.seconds_left(now) + sign * _total_seconds(slots))
            timer.updated_ms = now
            self._report("updated", timer)
        elif name == "HassPauseTimer":
            timer.seconds, timer.updated_ms, timer.is_active = timer.seconds_left(now), now, False
            self._report("paused", timer)
        elif name == "HassUnpauseTimer":
            timer.updated_ms, timer.is_active = now, True
            self._report("resumed", timer)
        return {}

    def _cancel(self, timer: Timer) -> None:
        self.timers.pop(timer.id, None)
        timer.is_active = False
        self._report("cancelled", timer)

    def find_all(self, slots: dict[str, Any]) -> list[Timer]:
        """Timers matching the name, room or start duration said (all when nothing is)."""
        found = list(self.timers.values())
        if slots.get("name"):
            wanted = str(slots["name"]).strip().casefold()
            found = [t for t in found if (t.name or "").casefold() == wanted]
        if slots.get("area"):
            found = [t for t in found if (t.area or "").casefold() == str(slots["area"]).casefold()]
        start = (_int(slots, "start_hours"), _int(slots, "start_minutes"), _int(slots, "start_seconds"))
        if any(v is not None for v in start):
            found = [t for t in found if (t.start_hours, t.start_minutes, t.start_seconds) == start]
        return found

    def find(self, slots: dict[str, Any], *, only_active: bool | None = None) -> Timer:
        """The one timer a request means (Home Assistant's rules); TimerError otherwise."""
        candidates = list(self.timers.values())
        if only_active is not None:
            candidates = [t for t in candidates if t.is_active == only_active]
            if len(candidates) == 1:
                return candidates[0]
        found = [t for t in self.find_all(slots) if t in candidates]
        if len(found) == 1:
            return found[0]
        raise TimerError("multiple_timers_matched" if found else "timer_not_found", found)

    # -- time passing ---------------------------------------------------------------------
    def tick(self) -> None:
        """Finish the timers that ran out (they wait to be announced)."""
        now = self.now_ms()
        for timer in [t for t in self.timers.values() if t.is_active and t.ends_ms() <= now]:
            del self.timers[timer.id]
            timer.is_active, timer.seconds, timer.updated_ms = False, 0, now
            self.finished.append(timer)
            self._report("finished", timer)

    def next_announcement(self) -> Timer | None:
        """A finished timer to announce now (the caller says it when the hub is free)."""
        while self.finished:
            timer = self.finished[0]
            if timer.announced < MAX_ANNOUNCEMENTS:
                timer.announced += 1
                return timer
            self.finished.pop(0)
        return None

    def announced(self, timer: Timer) -> None:
        """The announcement was heard to the end."""
        if timer in self.finished:
            self.finished.remove(timer)

    def status(self) -> list[dict[str, Any]]:
        """Every timer, as the status reply sees it."""
        now = self.now_ms()
        return [t.info(now) for t in self.timers.values()]


def announcement(timer: Timer) -> str:
    """What the hub says when a timer ends."""
    what = timer.describe()
    return f"{what[0].upper()}{what[1:]} is done."
