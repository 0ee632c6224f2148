"""The evaluation set for understanding and hearing: sentences, references, voices, a split.

- A home of its own (``data/eval_home.yaml``; its names are not the test home's).
- Sentences sampled from Home Assistant's English templates with hassil (every intent a
  hub supports, wildcards filled from small lists), and phrasings people use beside the
  templates (``data/phrasings.yaml``: traps, questions, what the templates miss, speech
  that is not for the hub).
- The reference of a sentence is Home Assistant's own matcher (hassil's best match over the
  same templates and lists, the hub's room as context, as the default agent does).
- Every case is in the development half or the test half by a hash of its text, fixed
  before any tuning; the benchmarks report the test half.
- Spoken renderings rotate through voices (every espeak-ng English variant used here, Piper
  at several speeds), noise (pink, babble) and reverb, by a hash too.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hassil
import yaml

from hub_runtime.agent import Agent
from hub_runtime.grammar.sample import ITEMS, MESSAGES, QUERIES, TIMER_NAMES, sample_sentences
from hub_runtime.nlu import CUSTOM_SENTENCE_KEY
from hub_runtime.settings import Settings

DATA = Path(__file__).resolve().parent / "data"
HOME = DATA / "eval_home.yaml"
SITE_AREA = "Living Room"  # the hub's own room in the evaluation home
PER_INTENT = 14  # sampled template sentences per intent (before the split)
VOICES = [("en-us", 1.0), ("piper", 1.0), ("en-gb", 1.0), ("en-us+f3", 1.1), ("piper", 0.85),
          ("en-us+m3", 0.9), ("en-gb-x-rp", 1.0), ("piper", 1.2), ("en-us+f4", 1.0), ("en-sc", 1.0),
          ("en-us+m7", 1.1), ("en-029", 1.0)]
CONDITIONS = ["clean", "clean", "pink", "babble", "reverb"]


@dataclass(frozen=True)
class Case:
    """One sentence of the set."""

    text: str
    source: str  # template | phrase
    reference: str | None  # Home Assistant's matcher's intent (None: no match)
    intended: str | None = None  # what the person means (phrases only)
    changes: dict[str, str] = field(default_factory=dict)  # the changes allowed (phrases only)
    voice: str = "piper"
    speed: float = 1.0
    condition: str = "clean"

    @property
    def split(self) -> str:
        """``dev`` or ``test``, fixed by the text."""
        return "dev" if _hash(self.text) % 2 == 0 else "test"


def _hash(text: str) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)


def settings() -> Settings:
    """The hub's settings for the evaluation home."""
    return Settings(catalog=str(HOME), site_area=SITE_AREA)


def reference(agent: Agent, text: str) -> Any:
    """Home Assistant's matcher on the text (the hub's room as the intent context)."""
    grammar = agent.model.grammar
    return hassil.recognize_best(
        text, grammar.intents, slot_lists=grammar.slot_lists, skip_words=grammar.document.get("skip_words"),
        intent_context={"area": {"value": SITE_AREA, "text": SITE_AREA}}, language="en",
        best_metadata_key=CUSTOM_SENTENCE_KEY, best_slot_name="name")


def _wildcards(agent: Agent, rng: random.Random) -> list[str]:
    lists = [e.name.lower() for e in agent.model.catalog if e.domain == "todo"]
    out = [f"add {rng.choice(ITEMS)} to my shopping list", f"put {rng.choice(ITEMS)} on the {rng.choice(lists)} list",
           f"add {rng.choice(ITEMS)} to the {rng.choice(lists)}", f"broadcast {rng.choice(MESSAGES)}",
           f"announce that {rng.choice(MESSAGES)}", f"play {rng.choice(QUERIES)} in the kitchen",
           f"set a timer for 5 minutes named {rng.choice(TIMER_NAMES)}",
           f"cancel the {rng.choice(TIMER_NAMES)} timer", "check off bread from my shopping list",
           "remove bread from the shopping list", "play the album thriller on the living room tv"]
    return out


def cases(agent: Agent | None = None, *, split: str | None = None, seed: int = 7) -> list[Case]:
    """Every case (or one half), with its reference and the voice it is rendered in."""
    agent = agent or Agent.from_settings(settings())
    rng = random.Random(seed)
    by_intent = sample_sentences(agent.model.grammar, rng, PER_INTENT)
    texts = [t for intent in sorted(by_intent) for t in by_intent[intent]]
    texts += _wildcards(agent, rng)
    out = []
    for text in dict.fromkeys(texts):
        ref = reference(agent, text)
        out.append(Case(text=text, source="template", reference=ref.intent.name if ref else None))
    for item in yaml.safe_load((DATA / "phrasings.yaml").read_text()):
        ref = reference(agent, item["text"])
        out.append(Case(text=item["text"], source="phrase", reference=ref.intent.name if ref else None,
                        intended=item.get("intent"), changes=dict(item.get("changes") or {})))
    rendered = []
    for case in out:
        h = _hash(case.text)
        voice, speed = VOICES[(h >> 3) % len(VOICES)]
        condition = CONDITIONS[(h >> 7) % len(CONDITIONS)]
        rendered.append(Case(**{**case.__dict__, "voice": voice, "speed": speed, "condition": condition}))
    return [c for c in rendered if split is None or c.split == split]
