"""An OpenAI-compatible chat server (llama.cpp server, Ollama) as the LLM engine, streamed over aiohttp."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from .base import EngineError, Message, Sampling, Stats, fit


class RemoteEngine:
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
                     budget: int | None = None) -> AsyncGenerator[str, None]:
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
