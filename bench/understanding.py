"""Understanding, typed and spoken: agreement with Home Assistant's matcher, and actions against the words.

On the evaluation set (``evalset.py``: sampled template sentences and phrasings, a home of
its own, the hub in its living room), per intent and in total:

- **agreement**: the hub's intent is the one Home Assistant's own matcher gives the text
  (None for None); a hub that asks first ("Which room?", "Do you want me to ...?") counts
  as agreeing only when the matcher found nothing;
- **wrong actions**: a state the hub changed that the reference did not change that way
  (template sentences: the reference intent run on the same home; phrasings: the changes
  the phrase allows).

Typed runs the understanding on the text; spoken renders the text in the case's voice
and condition (noise, reverb) and runs it through the real loop in fast file mode.
Reports the test half unless ``--dev``.
Usage: .venv/bin/python bench/understanding.py [--spoken] [--dev] [--llm] [--limit N] [--show]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import evalset

from hub_runtime.agent import Agent
from hub_runtime.audio.format import read_wav, write_wav
from hub_runtime.audio.synthetic import pink_noise, reverb, scene, speak
from hub_runtime.catalog import Catalog
from hub_runtime.engines import Engines
from hub_runtime.nlu import Nlu
from hub_runtime.protocol import TIMER_INTENTS
from hub_runtime.runner import run_file
from hub_runtime.timers import Timers
from hub_runtime.understanding import Understanding

AUDIO_CACHE = Path(__file__).resolve().parents[1] / "out" / "eval_audio"


@dataclass
class Outcome:
    """What the hub did with one case."""

    intent: str | None
    asked: bool
    states: dict[str, tuple[str, str]]
    heard: str = ""


def snapshot(catalog: Catalog) -> dict[str, tuple[str, str]]:
    """States and attributes (a scene's or script's run time left out: running one is its action)."""
    return {e.entity_id: (e.state, repr(sorted((k, v) for k, v in e.attributes.items() if k != "last_triggered")))
            for e in catalog}


def restore(catalog: Catalog, saved: dict[str, tuple[str, dict[str, Any]]]) -> None:
    for e in catalog:
        state, attributes = saved[e.entity_id]
        e.state, e.attributes = state, copy.deepcopy(attributes)


def expected_states(agent: Agent, case: evalset.Case, initial: dict[str, tuple[str, dict[str, Any]]]
                    ) -> dict[str, tuple[str, str]] | None:
    """The home after the reference (template sentences), or None (phrasings list their changes)."""
    if case.source != "template":
        return None
    restore(agent.model.catalog, initial)
    ref = evalset.reference(agent, case.text)
    if ref is not None and not ref.intent.name.startswith("DuplexHub") and ref.intent.name not in TIMER_INTENTS:
        nlu: Nlu = agent.model.nlu
        slots = {k: (int(v.value) if isinstance(v.value, float) and v.value.is_integer() else v.value)
                 for k, v in ref.entities.items()}
        intent = nlu.resolve(ref.intent.name, slots, case.text,
                             requires=dict(ref.intent_data.requires_context or {}),
                             response_key=ref.response or "default")
        agent.model.home.handle(intent)
    return snapshot(agent.model.catalog)


def wrong(case: evalset.Case, before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]],
          expected: dict[str, tuple[str, str]] | None) -> list[str]:
    """The entities the hub changed in a way the reference (or the phrase) does not allow.

    Free text (a list item, a search) heard with another spelling is a miss, not a wrong
    action: the item or search the person asked for, on the list or player they named.
    """
    bad = []
    for entity_id, now in after.items():
        if now == before[entity_id]:
            continue
        if expected is not None:
            if now[0] != expected[entity_id][0] or (now[1] != expected[entity_id][1]
                                                    and not entity_id.startswith(("todo.", "media_player."))):
                bad.append(entity_id)
            elif expected[entity_id] == before[entity_id]:
                bad.append(entity_id)  # the reference left it alone
        elif case.changes.get(entity_id) != now[0]:
            bad.append(entity_id)
    return bad


async def typed(cases: list[evalset.Case], use_llm: bool) -> dict[str, Outcome]:
    settings = evalset.settings()
    agent = Agent.from_settings(settings)
    initial = {e.entity_id: (e.state, copy.deepcopy(e.attributes)) for e in agent.model.catalog}
    engines = await Engines.load(settings, speech=False, llm=use_llm)
    out = {}
    try:
        for case in cases:
            restore(agent.model.catalog, initial)
            timers = Timers(now_ms=lambda: 0, area=settings.site_area)
            u = Understanding.build(settings, agent, engines.llm, timers=timers)
            if u.llm is not None:
                u.llm.preferences.path = None
            reply = await u.answer(case.text, conversation="c")
            out[case.text] = Outcome(reply.intent.name if reply.intent else None, reply.expects_reply,
                                     snapshot(agent.model.catalog), reply.response)
    finally:
        await engines.close()
    return out


def render(case: evalset.Case) -> np.ndarray:
    """The case's audio (cached): its voice, then its condition."""
    path = AUDIO_CACHE / f"{abs(hash((case.text, case.voice, case.speed, case.condition))) % 10**12}.wav"
    if path.exists():
        return read_wav(path)
    utt = speak(case.text, case.voice, speed=case.speed)
    if case.condition == "reverb":
        utt = reverb(utt, rt60_s=0.4, wet=0.4)
    mic = scene([(400, utt)], 400 + len(utt) // 16 + 1800)
    level = float(np.sqrt(np.mean(utt.astype(np.float64) ** 2)))
    if case.condition == "pink":
        mic = np.clip(mic + pink_noise(len(mic), level / 4, seed=len(case.text)), -32768, 32767).astype(np.int16)
    elif case.condition == "babble":  # other voices at a lower level (a room with people talking)
        chatter = np.resize(_babble(), len(mic))
        chatter *= level / 5 / (np.sqrt(np.mean(chatter ** 2)) + 1e-9)
        mic = np.clip(mic + chatter, -32768, 32767).astype(np.int16)
    write_wav(path, mic)
    return mic


@functools.cache
def _babble() -> np.ndarray:
    return sum(np.resize(speak(t, v), 16000 * 6).astype(np.float64) for t, v in (
        ("so I told him we would come over on sunday", "en-gb"),
        ("the train was late again this morning", "en-us+f3")))


async def spoken(cases: list[evalset.Case]) -> dict[str, Outcome]:
    settings = evalset.settings()
    engines = await Engines.load(settings, llm=False)
    agent = Agent.from_settings(settings)
    initial = {e.entity_id: (e.state, copy.deepcopy(e.attributes)) for e in agent.model.catalog}
    out = {}
    try:
        for case in cases:
            restore(agent.model.catalog, initial)
            result = await run_file(settings, render(case), engines=engines, agent=agent)
            intents = [e["name"] for e in result.events if e["type"] == "intent"]
            heard = " | ".join(f"{e['text']} [{e['tier']} {e['confidence']}; g: {e.get('grammar_text')} "
                               f"{e.get('grammar_confidence')}; w: {e.get('open_text') or ''}]"
                               for e in result.events if e["type"] == "transcript")
            asked = any(e.get("expects_reply") for e in result.events if e["type"] == "response")
            out[case.text] = Outcome(intents[0] if intents else None, asked, snapshot(agent.model.catalog), heard)
    finally:
        await engines.close()
    return out


def report(name: str, cases: list[evalset.Case], outcomes: dict[str, Outcome], show: bool) -> None:
    agent = Agent.from_settings(evalset.settings())
    initial = {e.entity_id: (e.state, copy.deepcopy(e.attributes)) for e in agent.model.catalog}
    before = snapshot(agent.model.catalog)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by: dict[str, dict[str, list[int]]] = {"voice": defaultdict(lambda: [0, 0]),
                                           "condition": defaultdict(lambda: [0, 0])}
    agree = wrongs = intended = n_intended = 0
    misses: list[str] = []
    bad_list: list[str] = []
    for case in cases:
        got = outcomes[case.text]
        ref = case.reference
        if ref is not None and ref.startswith("DuplexHub"):
            ref = None  # small talk: no intent, as no home intent
        ok = got.intent == ref and not (got.asked and ref is not None)
        if ref is None and got.asked:
            ok = True
        per[ref or "(none)"][0] += ok
        per[ref or "(none)"][1] += 1
        for label, key in (("voice", f"{case.voice} x{case.speed}"), ("condition", case.condition)):
            by[label][key][0] += ok
            by[label][key][1] += 1
        agree += ok
        if not ok:
            misses.append(f"{case.text!r} ({case.voice} x{case.speed} {case.condition}): ref {ref}, hub {got.intent}"
                          f"{' (asked)' if got.asked else ''} heard {got.heard!r}")
        bad = wrong(case, before, got.states, expected_states(agent, case, initial))
        if bad:
            wrongs += 1
            bad_list.append(f"{case.text!r}: {bad} heard {got.heard!r}")
        if case.source == "phrase":
            n_intended += 1
            intended += got.intent == case.intended or (got.asked and case.intended is not None)
    print(f"\n== {name}: {len(cases)} cases")
    for intent in sorted(per):
        k, n = per[intent]
        print(f"  {intent:30s} {k:3d}/{n:<3d}")
    print(f"agreement with Home Assistant's matcher: {agree}/{len(cases)} = {agree / max(1, len(cases)):.1%}")
    if name.startswith("spoken"):
        for label in ("voice", "condition"):
            print(f"  by {label}: " + ", ".join(f"{k} {a}/{n}" for k, (a, n) in sorted(by[label].items())))
    print(f"phrasings done or asked about as meant: {intended}/{n_intended}")
    print(f"wrong actions: {wrongs}")
    for line in bad_list:
        print("  WRONG", line)
    if show:
        for line in misses:
            print("  miss", line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spoken", action="store_true")
    parser.add_argument("--dev", action="store_true", help="the development half (for tuning)")
    parser.add_argument("--llm", action="store_true", help="typed: with the local LLM behind the templates")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--show", action="store_true", help="list the misses")
    parser.add_argument("--only", nargs="*", help="only these texts")
    args = parser.parse_args()
    cases = evalset.cases(split="dev" if args.dev else "test")
    if args.limit:
        cases = cases[: args.limit]
    if args.only:
        cases = [c for c in evalset.cases() if c.text in args.only]
    t0 = time.perf_counter()
    outcomes = asyncio.run(typed(cases, args.llm))
    report(f"typed ({'dev' if args.dev else 'test'} half{', with the LLM' if args.llm else ''})", cases,
           outcomes, args.show)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.spoken:
        t0 = time.perf_counter()
        heard = asyncio.run(spoken(cases))
        report(f"spoken ({'dev' if args.dev else 'test'} half)", cases, heard, args.show)
        conditions = Counter((c.voice, c.condition) for c in cases)
        print(f"voices and conditions: {len(conditions)} combinations ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
