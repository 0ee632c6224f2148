"""A real mosquitto broker on a free port, for the hub's tests and Home Assistant's (no hub imports)."""

from __future__ import annotations

import contextlib
import getpass
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def free_port() -> int:
    """A TCP port nobody listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    """Until something accepts connections on the port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on {port}")


class Mosquitto:
    """A real mosquitto broker on 127.0.0.1 with persistence (killable and restartable)."""

    def __init__(self, workdir: Path) -> None:
        """Configure on a free port."""
        self.port = free_port()
        self.dir = workdir
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {workdir}/\nautosave_interval 1\n"
            f"log_dest file {workdir}/mosquitto.log\n"
            # run as root, mosquitto would drop to its own user, who cannot write here
            f"user {getpass.getuser()}\n")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Run it and wait until it listens."""
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def kill(self) -> None:
        """SIGKILL: no goodbye to anyone."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        """Terminate."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None
