"""The outbox: intents waiting for the broker's acknowledgement, persisted in SQLite.

Bounded: when full, the oldest entries are dropped and the count is logged. Entries
keep their payload (and so the intent id) when resent, so a consumer can drop
duplicates.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..settings import state_dir

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One message waiting to be acknowledged."""

    seq: int
    topic: str
    payload: bytes


def default_path(hub_id: str) -> Path:
    """``$XDG_STATE_HOME/duplex_hub/outbox-<hub_id>.db`` (``~/.local/state`` by default)."""
    return state_dir() / f"outbox-{hub_id}.db"


class Outbox:
    """A bounded, ordered, persistent queue of messages."""

    def __init__(self, path: str | Path, max_entries: int) -> None:
        """Open (or create) the outbox file; ``:memory:`` keeps it in memory."""
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.max_entries = max_entries
        self.dropped = 0  # entries dropped because the outbox was full
        self._db = sqlite3.connect(str(path), isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                         " topic TEXT NOT NULL, payload BLOB NOT NULL)")
        self._count = int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
        if self._count:
            _LOGGER.info("outbox holds %d messages from before", self._count)

    def put(self, topic: str, payload: bytes) -> int:
        """Append; returns the sequence number."""
        cur = self._db.execute("INSERT INTO outbox (topic, payload) VALUES (?, ?)", (topic, payload))
        self._count += 1
        if self._count > self.max_entries:
            excess = self._count - self.max_entries
            self._db.execute("DELETE FROM outbox WHERE seq IN "
                             "(SELECT seq FROM outbox ORDER BY seq LIMIT ?)", (excess,))
            self._count -= excess
            self.dropped += excess
            _LOGGER.warning("outbox full (%d): dropped the %d oldest; %d dropped in all",
                            self.max_entries, excess, self.dropped)
        return int(cur.lastrowid or 0)

    def after(self, seq: int, limit: int) -> list[Entry]:
        """Up to ``limit`` entries after ``seq``, oldest first."""
        rows = self._db.execute("SELECT seq, topic, payload FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?",
                                (seq, limit)).fetchall()
        return [Entry(int(s), str(tp), bytes(p)) for s, tp, p in rows]

    def ack(self, seq: int) -> None:
        """The broker has it: forget it."""
        if self._db.execute("DELETE FROM outbox WHERE seq = ?", (seq,)).rowcount:
            self._count -= 1

    def __len__(self) -> int:
        """Entries waiting."""
        return self._count

    def close(self) -> None:
        """Close the file."""
        self._db.close()
