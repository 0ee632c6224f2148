"""Several rooms in one process: a dialogue loop per room, one set of engines, one home, one arbiter.

A satellite (a microphone and a speaker in a room without the hub's CPU) streams its
audio to the hub; :class:`Rooms` gives each site its own :class:`~.loop.DialogueLoop`
(its own VAD, recogniser state, turn taking and reply), made on first use and sharing the
process's :class:`~.engines.Engines` and :class:`~.agent.Agent`. The rooms' routers claim
their turns from one :class:`~.arbitration.Arbiter`, so an utterance heard in two rooms is
answered once, by the room that heard it loudest.

The satellite transports feed :meth:`Room.feed` (the websocket in ``http.py``); a room is
ticked by its own audio, one 30 ms frame per tick, and what its speaker plays comes back
from the same call. :func:`run_rooms` drives several rooms from files in lockstep (tests,
``bench/rooms.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .agent import Agent
from .arbitration import Arbiter
from .audio.format import Int16Array
from .engines import Engines
from .events import EventLog, EventSink
from .loop import DialogueLoop
from .pipeline import Clock
from .settings import Settings

_LOGGER = logging.getLogger(__name__)


@dataclass
class Room:
    """One site's loop and the audio waiting to make a whole frame."""

    site: str
    loop: DialogueLoop
    log: EventLog
    pending: Int16Array = field(default_factory=lambda: np.zeros(0, np.int16))
    position_ms: int = 0

    def feed(self, samples: Int16Array, *, realtime: bool = True) -> Int16Array:
        """Tick the loop once per whole frame in ``samples``; what its speaker plays meanwhile."""
        audio = np.concatenate([self.pending, np.asarray(samples, np.int16)])
        n = self.loop.chunk
        whole = len(audio) // n * n
        self.pending = audio[whole:]
        out = []
        for i in range(0, whole, n):
            t = self.loop.clock.now_ms() if realtime else self.position_ms
            self.loop.clock.position_ms = self.position_ms
            speaker, _heard = self.loop.tick(audio[i:i + n], t)
            self.position_ms += self.loop.settings.frame_ms
            out.append(speaker)
        return np.concatenate(out) if out else np.zeros(0, np.int16)


class Rooms:
    """The rooms of one process, made on first use."""

    def __init__(self, settings: Settings, engines: Engines, agent: Agent, *, realtime: bool = True,
                 events: Callable[[str], EventSink | None] | None = None, arbiter: Arbiter | None = None) -> None:
        """Share these engines and this home; ``events(site)``: an extra listener for a room's events."""
        self.settings, self.engines, self.agent = settings, engines, agent
        self.realtime = realtime
        self.arbiter = arbiter or Arbiter()
        self._events = events
        self.rooms: dict[str, Room] = {}
        self._lock = asyncio.Lock()

    async def room(self, site: str, *, area: str | None = None) -> Room:
        """The room of ``site`` (its loop started on first use; ``area``: the room's name in the home)."""
        async with self._lock:
            if site not in self.rooms:
                settings = replace(self.settings, site_id=site, site_area=area or self.settings.site_area)
                listener = self._events(site) if self._events else None
                log = EventLog(listener=listener, keep=not self.realtime)
                loop = DialogueLoop(settings, self.engines, self.agent, clock=Clock(realtime=self.realtime),
                                    events=log, arbiter=self.arbiter)
                await loop.start()
                loop.clock.start()
                self.rooms[site] = Room(site, loop, log)
                _LOGGER.info("room %s joined (%d rooms)", site, len(self.rooms))
            return self.rooms[site]

    async def close(self) -> None:
        """Stop every room's loop."""
        for room in self.rooms.values():
            await room.loop.stop()
        self.rooms.clear()


async def _settled(arbiter: Arbiter, room: Room) -> None:
    """Idle, or waiting for the arbiter (which waits for the other rooms' next frames)."""
    spins = 0
    while room.loop.pipeline.pending > 0 and room.site not in arbiter.waiting:
        spins += 1
        await asyncio.sleep(0 if spins < 50 else 0.001)


async def run_rooms(rooms: Rooms, mics: dict[str, Int16Array], *, tail_ms: int = 4000) -> dict[str, Int16Array]:
    """Feed each site its microphone track in lockstep, one frame per room per tick (fast mode).

    Returns what each room's speaker played, on the same timeline.
    """
    live = {site: await rooms.room(site) for site in mics}
    n = rooms.settings.audio.chunk_size
    total = max(len(m) for m in mics.values()) + tail_ms * n // rooms.settings.frame_ms
    out: dict[str, list[Int16Array]] = {site: [] for site in mics}
    for i in range(0, total, n):
        for site, room in live.items():
            frame = mics[site][i:i + n]
            frame = np.pad(frame, (0, n - len(frame))) if len(frame) < n else frame
            out[site].append(room.feed(frame, realtime=False))
        await asyncio.gather(*(_settled(rooms.arbiter, room) for room in live.values()))
    return {site: np.concatenate(parts) for site, parts in out.items()}
