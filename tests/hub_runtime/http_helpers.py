"""A hub loop served over HTTP, ticked with silence at real time (the operations and dashboard tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

import numpy as np

from hub_runtime.agent import Agent
from hub_runtime.driver import drive
from hub_runtime.engines import Engines
from hub_runtime.events import EventLog
from hub_runtime.loop import DialogueLoop
from hub_runtime.runner import running_loop
from hub_runtime.settings import Settings

CHUNK = 480


@contextlib.asynccontextmanager
async def served(engines: Engines, settings: Settings) -> AsyncIterator[tuple[DialogueLoop, str]]:
    """A loop ticked with silence at real time, served on a free port."""
    s = replace(settings, http=replace(settings.http, port=0), llm=replace(settings.llm, enabled=False))
    async with running_loop(s, EventLog(), realtime=True, mqtt=False, engines=engines,
                            agent=Agent.from_settings(s), http=True) as loop:
        stop = asyncio.Event()
        silence = np.zeros(CHUNK, np.int16)
        ticker = asyncio.create_task(drive(loop, lambda _ms: None if stop.is_set() else silence, realtime=True))
        try:
            assert loop.server is not None and loop.server.port
            yield loop, f"http://127.0.0.1:{loop.server.port}"
        finally:
            stop.set()
            await ticker


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float = 20.0) -> None:
    """Poll ``check`` (an HTTP request: nothing to wait on but the answer) until it holds."""
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
