"""Is the hub well? A stall detector that also feeds systemd's watchdog.

:class:`Health` wakes every ``period`` and checks three things:

- the **event loop** ran its timer on time (lag below ``http.stall_ms``): a blocking call
  on the loop shows here;
- the **dialogue loop** ticked recently (the audio device or the file driver feeds it a
  frame every 30 ms): a dead microphone or a stuck driver shows here;
- **no stage failed** in the last ``ERROR_WINDOW_S`` (an engine that raised).

A fallback in use (the voice on espeak-ng while Piper fails) is reported as ``degraded``
without making the hub unhealthy: it still answers. So is an **overload**: the process's
CPU (over ``LOAD_BEATS`` periods, of all cores) above ``http.max_cpu_percent``, or its
resident memory above ``http.max_memory_mb``; while it lasts the understanding does not
start the LLM ("I'm busy, one moment."), the grammar still answers, and it ends by itself
once the load has been below the limits as long.

Healthy, it sends ``WATCHDOG=1`` to systemd (``sd_notify``, when ``NOTIFY_SOCKET`` is set),
so systemd restarts a hub that stalls (``WatchdogSec`` in ``config/duplex-hub.service``);
unhealthy, it sends nothing. ``/healthz`` (``http.py``) answers from :meth:`check`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from . import protocol as p
from .metrics import Metrics

_LOGGER = logging.getLogger(__name__)

ERROR_WINDOW_S: Final = 30.0  # a stage error keeps the hub unhealthy this long
PERIOD_S: Final = 0.5  # how often the monitor checks (and pings the watchdog when well)
LOAD_BEATS: Final = 4  # an overload starts (and ends) after this many periods over (under) the limit
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_usage() -> tuple[float, float]:
    """(CPU seconds of the process, all threads; resident memory in MB)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            rss_mb = int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:
        rss_mb = 0.0
    return time.process_time(), rss_mb


def sd_notify(message: str) -> bool:
    """Send one state line to systemd (``READY=1``, ``WATCHDOG=1``, ``STOPPING=1``); False without systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as err:
        _LOGGER.warning("sd_notify %s failed: %s", message, err)
        return False
    return True


@dataclass(frozen=True)
class Report:
    """The outcome of one check."""

    ok: bool
    problems: tuple[str, ...] = ()
    lag_ms: int = 0
    last_tick_ms: int | None = None  # how long ago the loop ticked (None: it never did)
    degraded: tuple[str, ...] = ()  # fallbacks in use: the hub works (ok), worse

    def to_dict(self) -> dict[str, object]:
        """The JSON body of ``/healthz``."""
        return {"ok": self.ok, "problems": list(self.problems), "degraded": list(self.degraded),
                "event_loop_lag_ms": self.lag_ms, "last_tick_ms_ago": self.last_tick_ms}


@dataclass
class Health:
    """Watches the event loop and the dialogue loop's ticks; pings systemd while both are well."""

    stall_ms: int
    metrics: Metrics | None = None
    watchdog: bool = True
    now: Callable[[], float] = time.monotonic
    degraded: Callable[[], list[str]] = list  # the fallbacks in use, and why
    max_cpu_percent: int = 100
    max_memory_mb: int | None = None
    usage: Callable[[], tuple[float, float]] = process_usage
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    last_tick: float | None = None  # when the dialogue loop last ticked (``now`` seconds)
    _lag_s: float = 0.0
    _last_error: tuple[float, str] | None = None
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _well: bool | None = None
    _load: tuple[float, float] | None = None  # (now, CPU seconds) at the last beat
    _over: int = 0  # beats in a row over a limit (negative: under, while overloaded)
    _overloaded: str | None = None
    _why: str = ""

    def overloaded(self) -> str | None:
        """Why the machine is overloaded now (the LLM waits), or None."""
        return self._overloaded

    def _measure_load(self) -> None:
        now = self.now()
        cpu_s, rss_mb = self.usage()
        last, self._load = self._load, (now, cpu_s)
        if last is None or now <= last[0]:
            return
        percent = 100 * (cpu_s - last[1]) / (now - last[0]) / self.cpus
        over = []
        if percent > self.max_cpu_percent:
            over.append(f"CPU {percent:.0f}% > {self.max_cpu_percent}%")
        if self.max_memory_mb is not None and rss_mb > self.max_memory_mb:
            over.append(f"memory {rss_mb:.0f} MB > {self.max_memory_mb} MB")
        if self._overloaded is None:
            self._over = self._over + 1 if over else 0
            self._why = "; ".join(over) or self._why
            if self._over >= LOAD_BEATS:
                self._overloaded, self._over = f"overloaded: {self._why}", 0
                _LOGGER.warning("%s: the LLM waits until the load is down", self._overloaded)
        else:
            self._over = 0 if over else self._over - 1
            if -self._over >= LOAD_BEATS:
                _LOGGER.warning("the load is down again")
                self._overloaded, self._over = None, 0
        if self.metrics is not None:
            self.metrics.degraded.labels("load").set(1 if self._overloaded else 0)

    def ticked(self) -> None:
        """The dialogue loop took a frame."""
        now = self.now()
        if self.metrics is not None:
            self.metrics.ticks.inc()
            if self.last_tick is not None and (now - self.last_tick) * 1000 > self.stall_ms:
                self.metrics.late_ticks.inc()
        self.last_tick = now

    def on_event(self, event: p.Event) -> None:
        """An error event makes the hub unhealthy for a while."""
        if isinstance(event, p.ErrorEvent):
            self._last_error = (self.now(), event.message)

    def check(self) -> Report:
        """Healthy now? With the reasons when not."""
        now = self.now()
        problems = []
        lag_ms = int(self._lag_s * 1000)
        if lag_ms > self.stall_ms:
            problems.append(f"the event loop ran {lag_ms} ms late")
        age_ms = None if self.last_tick is None else int((now - self.last_tick) * 1000)
        if age_ms is None:
            problems.append("the dialogue loop has not ticked yet")
        elif age_ms > self.stall_ms:
            problems.append(f"no audio frame for {age_ms} ms")
        if self._last_error is not None and now - self._last_error[0] < ERROR_WINDOW_S:
            problems.append(f"a stage failed: {self._last_error[1]}")
        degraded = tuple(self.degraded()) + ((self._overloaded,) if self._overloaded else ())
        report = Report(ok=not problems, problems=tuple(problems), lag_ms=lag_ms, last_tick_ms=age_ms,
                        degraded=degraded)
        if self.metrics is not None:
            self.metrics.healthy.set(1 if report.ok else 0)
            self.metrics.loop_lag.set(self._lag_s)
        if report.ok != self._well:
            if report.ok:
                _LOGGER.info("healthy")
            else:
                _LOGGER.warning("unhealthy: %s", "; ".join(problems))
            self._well = report.ok
        return report

    def beat(self, lag_s: float) -> Report:
        """One period of the monitor: record the event loop's lag, check, ping systemd if well."""
        self._lag_s = max(0.0, lag_s)
        self._measure_load()
        report = self.check()
        if report.ok and self.watchdog:
            sd_notify("WATCHDOG=1")
        return report

    def start(self) -> None:
        """Run the monitor on the event loop; tell systemd the hub is ready."""
        if self.watchdog:
            sd_notify("READY=1")
        self._task = asyncio.create_task(self._run(), name="health")

    async def stop(self) -> None:
        """Stop the monitor; tell systemd the hub is stopping."""
        if self.watchdog:
            sd_notify("STOPPING=1")
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(PERIOD_S)
            self.beat(time.monotonic() - before - PERIOD_S)
