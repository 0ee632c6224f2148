"""The hub's web server: health, Prometheus metrics and a live dashboard (aiohttp).

    GET  /             the dashboard (``data/dashboard.html``): state, a command box, the
                       last turns with their latency chart, the home's devices
    GET  /healthz      200 {"ok": true, ...} while the loop ticks on time and no stage
                       failed, else 503 with the problems (``health.py``)
    GET  /metrics      Prometheus text format (``metrics.py``)
    GET  /api/status   {"status", "health", "turns", "entities"} — what the dashboard draws
    POST /api/command  {"text": "..."} — handled as if spoken (the reply is spoken too); 202
    GET  /satellite/{site}[?area=Kitchen]   websocket of a satellite room: binary messages
                       are its microphone (16 kHz mono int16 LE, any length); each is
                       answered with what the room's speaker plays meanwhile (same format)

It binds to 127.0.0.1 by default. Bound elsewhere it needs ``http.token`` (settings refuse
to start without one), sent as ``Authorization: Bearer <token>`` or, for the page, as
``?token=``. Everything runs on the hub's event loop; handlers only read state and hand
text to :meth:`DialogueLoop.hear`.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from importlib import resources
from typing import Any, Final

import numpy as np
from aiohttp import WSMsgType, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .health import Health
from .loop import DialogueLoop
from .metrics import Metrics
from .rooms import Rooms
from .settings import HttpSettings

_LOGGER = logging.getLogger(__name__)

MAX_COMMAND_CHARS: Final = 500
MAX_SATELLITE_MESSAGE: Final = 64 * 1024  # bytes of audio per message (2 s at 16 kHz)
_LOOP: Final = web.AppKey("loop", DialogueLoop)
_METRICS: Final = web.AppKey("metrics", Metrics)
_HEALTH: Final = web.AppKey("health", Health)
_ROOMS: Final = web.AppKey("rooms", Rooms)
SITE_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _dashboard() -> str:
    return resources.files("hub_runtime").joinpath("data/dashboard.html").read_text(encoding="utf-8")


def make_app(loop: DialogueLoop, metrics: Metrics, health: Health, *, token: str | None,
             rooms: Rooms | None = None) -> web.Application:
    """The application: routes, and the token check when a token is set."""
    middlewares = [_auth(token)] if token else []
    app = web.Application(middlewares=middlewares, client_max_size=16 * 1024)
    app[_LOOP], app[_METRICS], app[_HEALTH] = loop, metrics, health
    if rooms is not None:
        app[_ROOMS] = rooms
        app.router.add_get("/satellite/{site}", _satellite)
    app.router.add_get("/", _index)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/api/status", _status)
    app.router.add_post("/api/command", _command)
    return app


def _auth(token: str) -> Any:
    @web.middleware
    async def check(request: web.Request, handler: Any) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() \
            or request.query.get("token", "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return web.json_response({"error": "a bearer token is needed"}, status=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        response: web.StreamResponse = await handler(request)
        return response

    return check


async def _index(request: web.Request) -> web.Response:
    return web.Response(text=_dashboard(), content_type="text/html")


async def _healthz(request: web.Request) -> web.Response:
    report = request.app[_HEALTH].check()
    return web.json_response(report.to_dict(), status=200 if report.ok else 503)


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[_METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _status(request: web.Request) -> web.Response:
    loop = request.app[_LOOP]
    entities = [{"entity_id": e.entity_id, "name": e.name, "area": e.area, "state": e.state}
                for e in loop.agent.model.catalog]
    return web.json_response({"status": loop.status().to_dict(), "health": request.app[_HEALTH].check().to_dict(),
                              "turns": request.app[_METRICS].snapshot(), "entities": entities})


async def _command(request: web.Request) -> web.Response:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return web.json_response({"error": "the body is not JSON"}, status=400)
    text = data.get("text") if isinstance(data, dict) else None
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_COMMAND_CHARS:
        return web.json_response({"error": f"text: a non-empty string of at most {MAX_COMMAND_CHARS} characters"},
                                 status=400)
    await request.app[_LOOP].hear(text.strip())
    return web.json_response({"accepted": True}, status=202)


async def _satellite(request: web.Request) -> web.StreamResponse:
    site = request.match_info["site"]
    main = request.app[_LOOP].settings.site_id
    if not SITE_RE.match(site) or site == main:
        return web.json_response({"error": f"site: letters, digits, _ and - (and not {main}, the hub's own)"},
                                 status=400)
    room = await request.app[_ROOMS].room(site, area=request.query.get("area") or None)
    ws = web.WebSocketResponse(max_msg_size=MAX_SATELLITE_MESSAGE)
    await ws.prepare(request)
    _LOGGER.info("satellite %s connected", site)
    async for message in ws:
        if message.type == WSMsgType.BINARY:
            if len(message.data) % 2:
                _LOGGER.warning("satellite %s: an odd number of bytes is not int16 audio; dropped", site)
                continue
            speaker = room.feed(np.frombuffer(message.data, np.int16))
            await ws.send_bytes(speaker.astype("<i2").tobytes())
        elif message.type == WSMsgType.ERROR:
            break
    _LOGGER.info("satellite %s left", site)
    return ws


class HttpServer:
    """The server's lifetime: :meth:`start` binds, :meth:`stop` closes."""

    def __init__(self, settings: HttpSettings, loop: DialogueLoop, metrics: Metrics, health: Health, *,
                 rooms: Rooms | None = None) -> None:
        """Serve this loop's state with these metrics and health (and satellites' ``rooms``)."""
        self.settings = settings
        self.rooms = rooms
        self._app = make_app(loop, metrics, health, token=settings.token, rooms=rooms)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None  # the bound port (``http.port`` 0 picks a free one)

    async def start(self) -> None:
        """Bind and serve; OSError (e.g. the port is taken) propagates."""
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.host, self.settings.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        server = site._server  # the bound socket's port, also when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.settings.port
        _LOGGER.info("dashboard on http://%s:%s/", self.settings.host, self.port)

    async def stop(self) -> None:
        """Close the server."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
