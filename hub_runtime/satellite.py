"""``hub-runtime satellite``: a room without the hub's CPU — its microphone to the hub, the hub's voice back.

It connects to a hub's ``/satellite/<site>`` websocket (``http.py``) and sends 30 ms
frames of 16 kHz mono int16; every frame is answered with what the room's speaker plays
meanwhile. The hub runs the room's whole dialogue (its own loop over the hub's engines)
and, when several rooms hear the same words, lets only the loudest answer. The
microphone is the default sound device, or a WAV file (``--input``, sent at real speed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final
from urllib.parse import quote

import aiohttp
import numpy as np

from .audio.format import RATE, Int16Array

_LOGGER = logging.getLogger(__name__)

FRAME: Final = 480  # samples per message (30 ms)


def satellite_url(hub: str, site: str, area: str | None = None) -> str:
    """``ws://host:port`` (or http://) and a site -> the room's websocket address."""
    base = hub.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://", 1)
    if not base.startswith(("ws://", "wss://")):
        base = "ws://" + base
    return f"{base}/satellite/{quote(site)}" + (f"?area={quote(area)}" if area else "")


async def _exchange(ws: aiohttp.ClientWebSocketResponse, frame: Int16Array) -> Int16Array:
    """One microphone frame to the hub; what the room's speaker plays meanwhile."""
    await ws.send_bytes(frame.astype("<i2").tobytes())
    reply = await ws.receive()
    if reply.type != aiohttp.WSMsgType.BINARY:
        raise ConnectionError(f"the hub closed the room ({reply.type.name})")
    return np.frombuffer(reply.data, "<i2").astype(np.int16)


async def stream_file(url: str, mic: Int16Array, *, token: str | None = None, realtime: bool = True,
                      linger_s: float = 2.0) -> Int16Array:
    """Send a recording as the room's microphone (then ``linger_s`` of silence); what the room played."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    tail = np.zeros(int(linger_s * RATE), np.int16)
    audio = np.concatenate([np.asarray(mic, np.int16), tail])
    out: list[Int16Array] = []
    async with aiohttp.ClientSession(headers=headers) as session, session.ws_connect(url) as ws:
        t0 = time.perf_counter()
        for i, start in enumerate(range(0, len(audio), FRAME)):
            frame = audio[start:start + FRAME]
            out.append(await _exchange(ws, np.pad(frame, (0, FRAME - len(frame)))))
            if realtime:
                await asyncio.sleep(max(0.0, t0 + (i + 1) * FRAME / RATE - time.perf_counter()))
    return np.concatenate(out) if out else np.zeros(0, np.int16)


async def stream_live(url: str, *, token: str | None = None) -> None:
    """The default microphone and speaker as the room, until interrupted."""
    from .audio.devices import LiveDuplex
    from .settings import Settings

    device = LiveDuplex(Settings())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession(headers=headers) as session, session.ws_connect(url) as ws:
            async for frame in device.frames():
                device.play(await _exchange(ws, frame))
    finally:
        device.close()
