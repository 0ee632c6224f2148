"""The embedded broker: amqtt in process on 127.0.0.1, used when no broker is configured.

amqtt speaks MQTT 3.1.1 only; a hub that needs MQTT 5 configures ``mqtt.host``.
"""

from __future__ import annotations

import logging
from typing import Any

_LOGGER = logging.getLogger(__name__)


class BrokerError(RuntimeError):
    """The embedded broker could not start; str() says why."""


class EmbeddedBroker:
    """An amqtt broker bound to 127.0.0.1:port, anonymous, no $SYS topics."""

    def __init__(self, port: int) -> None:
        """Listen on this port."""
        self.port = port
        self._broker: Any = None

    async def start(self) -> None:
        """Start listening; raises BrokerError (port taken, ...)."""
        for name in ("amqtt", "transitions"):
            logging.getLogger(name).setLevel(logging.WARNING)
        from amqtt.broker import Broker

        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{self.port}"}},
            "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
        }
        broker = Broker(config)
        try:
            await broker.start()
        except Exception as err:  # amqtt wraps bind errors in its own types
            raise BrokerError(f"embedded MQTT broker on 127.0.0.1:{self.port}: {err}") from None
        self._broker = broker
        _LOGGER.info("embedded MQTT broker on 127.0.0.1:%d", self.port)

    async def stop(self) -> None:
        """Stop and close every connection."""
        if self._broker is not None:
            broker, self._broker = self._broker, None
            await broker.shutdown()
