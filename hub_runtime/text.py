"""Text as the hub speaks and hears it: one sentence splitter for every use."""

from __future__ import annotations

import re
from typing import Final

# a sentence ends at . ! or ? (closing quotes or brackets may follow) before white space
SENTENCE_END: Final = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones left out."""
    return [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]


def complete_sentences(pending: str) -> tuple[list[str], str]:
    """Streaming text: (the sentences already complete, the unfinished rest)."""
    parts = SENTENCE_END.split(pending)
    return [p.strip() for p in parts[:-1] if p.strip()], parts[-1]
