"""The link to the broker: a paho-mqtt 2.x client driven by the asyncio loop.

paho's socket callbacks register the socket with the event loop (``add_reader`` /
``add_writer``), so reads, writes and callbacks all run on the loop thread; only the
blocking TCP/TLS connect runs in a worker thread. Each connection attempt gets a fresh
client, so nothing paho queued on a dead connection is replayed behind our back: the
:class:`~.outbox.Outbox` is the one place that holds what must still be delivered, and
it is resent in order after every reconnect. Reconnects back off exponentially.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import ssl
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from ..settings import MqttSettings
from .outbox import Outbox

_LOGGER = logging.getLogger(__name__)

MAX_INFLIGHT: Final = 32  # outbox messages published and not yet acknowledged
MISC_INTERVAL_S: Final = 1.0  # paho's keep-alive housekeeping
RECONNECT_MIN_S: Final = 0.25
CONNECT_TIMEOUT_S: Final = 10.0

MessageHandler = Callable[[str, bytes], None]


class MqttLink:
    """One broker connection with its reconnect loop and the outbox pump."""

    def __init__(self, settings: MqttSettings, *, host: str, port: int, outbox: Outbox,
                 subscriptions: list[str], will: tuple[str, bytes],
                 on_message: MessageHandler, on_connected: Callable[[], None]) -> None:
        """Connect to host:port; ``will`` is the retained last will (topic, payload)."""
        self.settings = settings
        self.host, self.port = host, port
        self.outbox = outbox
        self.subscriptions = subscriptions
        self.will = will
        self.on_message = on_message
        self.on_connected = on_connected
        self.connected = asyncio.Event()
        self.ready = asyncio.Event()  # connected and the broker acknowledged the subscriptions
        self._sub_mid: int | None = None
        self.connections = 0  # successful connections so far
        self._client: mqtt.Client | None = None
        self._closed: asyncio.Event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._misc: asyncio.Task[None] | None = None
        self._inflight: dict[int, int] = {}  # paho mid -> outbox seq
        self._last_sent = 0  # highest outbox seq published on this connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._down_logged = False

    # -- life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        """Start the connect loop (returns at once; ``connected`` is set when up)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="mqtt.link")

    async def stop(self, last_words: Sequence[tuple[str, bytes]] = ()) -> None:
        """Publish ``last_words`` (retained), disconnect cleanly and end the loop."""
        self._stopping = True
        client = self._client
        if client is not None and self.connected.is_set():
            infos = [client.publish(topic, payload, qos=1, retain=True) for topic, payload in last_words]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    while any(not i.is_published() for i in infos):  # noqa: ASYNC110 (paho gives no awaitable)
                        await asyncio.sleep(0.01)
            client.disconnect()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._teardown()

    # -- publishing ---------------------------------------------------------------------
    def publish(self, topic: str, payload: bytes, *, qos: int = 0, retain: bool = False) -> bool:
        """Best effort: publish now if connected; False (dropped) otherwise."""
        client = self._client
        if client is None or not self.connected.is_set():
            return False
        info = client.publish(topic, payload, qos=qos, retain=retain)
        return info.rc == mqtt.MQTT_ERR_SUCCESS

    def publish_reliable(self, topic: str, payload: bytes) -> int:
        """QoS 1 through the outbox: kept on disk until the broker acknowledges it."""
        seq = self.outbox.put(topic, payload)
        self._pump()
        return seq

    def _pump(self) -> None:
        client = self._client
        if client is None or not self.connected.is_set():
            return
        room = MAX_INFLIGHT - len(self._inflight)
        if room <= 0:
            return
        for entry in self.outbox.after(self._last_sent, room):
            info = client.publish(entry.topic, entry.payload, qos=1)
            if info.rc != mqtt.MQTT_ERR_SUCCESS:
                break  # the connection is going; the next one resends from here
            self._inflight[info.mid] = entry.seq
            self._last_sent = entry.seq

    # -- the connect loop ---------------------------------------------------------------
    async def _run(self) -> None:
        delay = RECONNECT_MIN_S
        while not self._stopping:
            try:
                await self._connect()
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await self.connected.wait()
            except (OSError, ssl.SSLError, TimeoutError, ValueError) as err:
                if not self._down_logged:
                    _LOGGER.warning("MQTT broker %s:%s unavailable: %s", self.host, self.port, err)
                    self._down_logged = True
                self._teardown()
                await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))
                delay = min(delay * 2, self.settings.reconnect_max_s)
                continue
            delay = RECONNECT_MIN_S
            await self._closed.wait()
            self._teardown()
            if not self._stopping:
                await asyncio.sleep(RECONNECT_MIN_S * (0.8 + 0.4 * random.random()))

    def _new_client(self) -> mqtt.Client:
        s = self.settings
        v5 = s.protocol == "5"
        client = mqtt.Client(CallbackAPIVersion.VERSION2,
                             client_id=f"{s.hub_id}-{uuid.uuid4().hex[:8]}",
                             protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
                             clean_session=None if v5 else True)
        client.max_inflight_messages_set(MAX_INFLIGHT)
        client.max_queued_messages_set(0)
        if s.username is not None:
            client.username_pw_set(s.username, s.password)
        if s.tls:
            client.tls_set(ca_certs=s.ca_certs, certfile=s.certfile, keyfile=s.keyfile)
            client.tls_insecure_set(s.tls_insecure)
        client.will_set(self.will[0], self.will[1], qos=1, retain=True)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        client.on_socket_open = lambda c, _u, sock: self._soon(self._socket_open, c, sock)
        client.on_socket_close = lambda c, _u, sock: self._soon(self._socket_close, c, sock)
        client.on_socket_register_write = lambda c, _u, sock: self._soon(self._want_write, c, sock, True)
        client.on_socket_unregister_write = lambda c, _u, sock: self._soon(self._want_write, c, sock, False)
        return client

    def _soon(self, handler: Callable[..., None], *args: Any) -> None:
        """Run a paho socket callback (from any thread) on the loop thread."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(handler, *args)

    async def _connect(self) -> None:
        self._closed = asyncio.Event()
        self.connected.clear()
        self.ready.clear()
        self._inflight.clear()
        self._last_sent = 0
        client = self._client = self._new_client()
        client.on_subscribe = self._on_subscribe
        kwargs: dict[str, Any] = {"keepalive": self.settings.keepalive_s}
        if self.settings.protocol == "5":
            kwargs["clean_start"] = True
        await asyncio.to_thread(client.connect, self.host, self.port, **kwargs)
        if self._misc is None or self._misc.done():
            self._misc = asyncio.create_task(self._housekeeping(), name="mqtt.misc")

    def _teardown(self) -> None:
        client, self._client = self._client, None
        self.connected.clear()
        self.ready.clear()
        if client is not None:
            sock = client.socket()
            if sock is not None and self._loop is not None:
                with contextlib.suppress(ValueError, OSError):
                    self._loop.remove_reader(sock)
                    self._loop.remove_writer(sock)
            with contextlib.suppress(Exception):
                client.disconnect()
            with contextlib.suppress(Exception):
                if sock is not None:
                    sock.close()
        if self._misc is not None and (self._stopping or client is None):
            self._misc.cancel()
            self._misc = None

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(MISC_INTERVAL_S)
            client = self._client
            if client is not None and client.loop_misc() != mqtt.MQTT_ERR_SUCCESS:
                self._closed.set()

    # -- socket callbacks (on the loop thread) --------------------------------------------
    def _socket_open(self, client: mqtt.Client, sock: socket.socket) -> None:
        if client is self._client and self._loop is not None:
            self._loop.add_reader(sock, self._read, client)

    def _socket_close(self, client: mqtt.Client, sock: socket.socket) -> None:
        if self._loop is not None and client is self._client:
            with contextlib.suppress(ValueError, OSError):  # already closed
                self._loop.remove_reader(sock)
                self._loop.remove_writer(sock)
        if client is self._client:
            self._closed.set()

    def _want_write(self, client: mqtt.Client, sock: socket.socket, want: bool) -> None:
        if client is not self._client or self._loop is None:
            return
        if want:
            self._loop.add_writer(sock, client.loop_write)
        else:
            self._loop.remove_writer(sock)

    def _read(self, client: mqtt.Client) -> None:
        rc = client.loop_read()
        if rc != mqtt.MQTT_ERR_SUCCESS and client is self._client:
            self._closed.set()

    # -- paho callbacks (on the loop thread) -----------------------------------------------
    def _on_connect(self, client: mqtt.Client, _userdata: Any, _flags: Any, reason: Any,
                    _props: Any = None) -> None:
        if reason.is_failure:
            _LOGGER.warning("MQTT broker refused the connection: %s", reason)
            self._closed.set()
            return
        if self._down_logged or self.connections == 0:
            _LOGGER.info("MQTT connected to %s:%s", self.host, self.port)
        self._down_logged = False
        self.connections += 1
        if self.subscriptions:
            _rc, self._sub_mid = client.subscribe([(topic, 1) for topic in self.subscriptions])
        else:
            self.ready.set()
        self.connected.set()
        self.on_connected()
        self._pump()

    def _on_subscribe(self, client: mqtt.Client, _userdata: Any, mid: int, _reasons: Any,
                      _props: Any = None) -> None:
        if client is self._client and mid == self._sub_mid:
            self.ready.set()

    def _on_disconnect(self, client: mqtt.Client, _userdata: Any, _flags: Any, reason: Any,
                       _props: Any = None) -> None:
        if client is self._client:
            if not self._stopping:
                _LOGGER.warning("MQTT connection lost: %s", reason)
                self._down_logged = True
            self.connected.clear()
            self._closed.set()

    def _on_message(self, _client: mqtt.Client, _userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            self.on_message(message.topic, bytes(message.payload))
        except Exception:  # a handler bug must not take the link down
            _LOGGER.exception("handling %s failed", message.topic)

    def _on_publish(self, client: mqtt.Client, _userdata: Any, mid: int, reason: Any,
                    _props: Any = None) -> None:
        if client is not self._client:
            return
        seq = self._inflight.pop(mid, None)
        if seq is None:
            return
        if getattr(reason, "is_failure", False):
            _LOGGER.warning("broker refused outbox message %d: %s (dropped)", seq, reason)
        self.outbox.ack(seq)
        self._pump()
