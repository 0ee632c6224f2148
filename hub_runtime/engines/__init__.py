"""The model engines, behind the small interfaces of :mod:`.base`: one file each.

:class:`Engines` is the one factory and the one owner: it loads what every room of a
process shares (Whisper, the voice, the LLM child process) and closes it; the per-room
engines (speech scorer, echo canceller, wake word) are made by its ``make_*`` functions,
one instance per room, because they keep per-stream state.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ..audio.format import Int16Array
from .base import EchoCanceller, EngineError, LlmEngine, SpeechScorer, Synth, Transcriber, WakeWordDetector

if TYPE_CHECKING:
    from ..settings import Settings

_LOGGER = logging.getLogger(__name__)

AHEAD_POLL_S: Final = 0.05  # how often the voice looks whether the rooms are idle again, to make replies ahead


@dataclass
class Engines:
    """What every room of a process shares; :meth:`close` releases it."""

    whisper: Transcriber | None
    synth: Synth
    llm: LlmEngine | None = None  # None: grammar only

    @classmethod
    async def load(cls, settings: Settings, *, speech: bool = True, llm: bool = True) -> Engines:
        """Load Whisper, the voice (``speech``) and the LLM (``llm``), in worker threads, in parallel."""
        whisper_t = asyncio.to_thread(make_transcriber, settings) if speech else asyncio.sleep(0, None)
        synth_t = asyncio.to_thread(make_synth, settings) if speech else asyncio.sleep(0, _Silent())
        llm_t = asyncio.to_thread(load_llm, settings) if llm and settings.llm.enabled else asyncio.sleep(0, None)
        whisper, synth, engine = await asyncio.gather(whisper_t, synth_t, llm_t)
        return cls(whisper=whisper, synth=synth, llm=engine)

    async def close(self) -> None:
        """Close what holds a process or a connection (the LLM)."""
        engine, self.llm = self.llm, None
        if engine is not None:
            await engine.close()
        if isinstance(self.synth, CachedSynth):
            await asyncio.to_thread(self.synth.close)


class _Silent:
    """No voice (a text-only process such as ``hub-runtime ask``)."""

    def sentences(self, text: str) -> list[tuple[str, Int16Array]]:
        """Nothing to say aloud."""
        return []


def make_transcriber(settings: Settings) -> Transcriber | None:
    """The second tier (``asr.second_tier``), or None."""
    if settings.asr.second_tier != "whisper":
        return None
    from .whisper import WhisperTranscriber

    # CTranslate2 (the encoder, the free decode) leaves a core to the search within the grammar,
    # which runs beside its free decode: in real time on 2 cores, with the loop's own work on
    # them too, its second thread made the pause's pass slower (p50 109 against 91 ms over the
    # voice-loop bench's 30 commands, the turn's end 236 against 220 ms after the speech)
    return WhisperTranscriber(settings.asr.whisper_model, threads=max(1, settings.hardware.num_threads - 1),
                              beam_size=settings.asr.beam_size)


def make_synth(settings: Settings) -> Synth:
    """The voice (``tts.engine``); Piper with espeak-ng behind it for when it fails."""
    from .espeak import EspeakSynth

    if settings.tts.engine == "piper":
        from .piper import PiperSynth

        return CachedSynth(FallbackSynth(PiperSynth(settings.tts.voice, length_scale=settings.tts.length_scale,
                                                    threads=settings.hardware.num_threads), EspeakSynth()))
    return CachedSynth(EspeakSynth())


class CachedSynth:
    """A voice that keeps what it said: a reply said again ("Turned on the light") is played at once.

    Home Assistant's replies are few and short, and a home says the same few many times a
    day; synthesising one costs ~70 ms before its first audio and ~0.1 s of CPU. The last
    replies, up to ``max_bytes`` of audio, are kept whole (one that was cut short, or said
    with the fallback voice, is not). The replies that depend on nothing said are made ahead
    (:meth:`make_ahead`), in a worker thread, while every room is idle.

    The voice makes one sentence at a time (espeak-ng's phonemizer, under Piper, is not
    thread-safe): a reply waits for at most one sentence made ahead.
    """

    def __init__(self, synth: Synth, *, max_bytes: int = 16 << 20) -> None:
        """Keep ``synth``'s replies (16 MiB: ~8 minutes of speech)."""
        self.synth = synth
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, list[tuple[str, Int16Array]]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # rooms share the voice
        self._voice = threading.Lock()  # held while the voice makes a sentence
        self.hits = self.misses = 0
        self._ahead: list[str] = []  # replies to make ahead, next first
        self._idle: list[Callable[[], bool]] = []  # whether each room is idle (make ahead only then)
        self._speaking = 0  # replies being made for a room now
        self._wake = threading.Event()  # the worker has something to look at
        self._stop = threading.Event()  # the worker is to stop (set by close)
        self._worker: threading.Thread | None = None

    @property
    def degraded(self) -> str | None:
        """Why the voice behind is in its fallback, if it is."""
        return getattr(self.synth, "degraded", None)

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        """Yield (sentence, audio): kept, or made by the voice (and kept when it was made whole)."""
        with self._lock:
            kept = self._kept.get(text)
            if kept is not None:
                self._kept.move_to_end(text)
                self.hits += 1
            else:
                self.misses += 1
                self._speaking += 1
        if kept is not None:
            yield from kept
            return
        try:
            yield from self._made(text)
        finally:
            with self._lock:
                self._speaking -= 1
            self._wake.set()

    def _made(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        """The voice's sentences, each made under the voice's lock; the reply is kept once made whole."""
        inner = iter(self.synth.sentences(text))
        made: list[tuple[str, Int16Array]] = []
        while True:
            with self._voice:
                item = next(inner, None)
            if item is None:
                break
            made.append((item[0], _frozen(item[1])))
            yield item
        if self.degraded is None and made:
            self._keep(text, made)

    def keeps(self, text: str) -> bool:
        """Whether this reply is kept (played at once when said)."""
        with self._lock:
            return text in self._kept

    def make_ahead(self, texts: list[str], idle: Callable[[], bool]) -> None:
        """Make these replies now, in a worker thread, whenever no room is busy (``idle`` is one room's).

        Replies already kept are skipped; a reply a room needs meanwhile goes first. After
        :meth:`close`, a new worker starts.
        """
        with self._lock:
            if idle not in self._idle:
                self._idle.append(idle)
            self._ahead = list(dict.fromkeys([*self._ahead, *(t for t in texts if t and t not in self._kept)]))
            if self._worker is None:
                self._stop = threading.Event()
                self._worker = threading.Thread(target=self._work, args=(self._stop,), name="voice-ahead",
                                                daemon=True)
                self._worker.start()
        self._wake.set()

    def forget(self, idle: Callable[[], bool]) -> None:
        """A room stopped: its idleness no longer counts."""
        with self._lock:
            if idle in self._idle:
                self._idle.remove(idle)

    def close(self) -> None:
        """Stop making replies ahead and forget those not made yet (what is kept stays; the voice still speaks)."""
        with self._lock:
            worker, self._worker = self._worker, None
            self._ahead.clear()
            self._stop.set()
        self._wake.set()
        if worker is not None:
            worker.join()

    def _free(self) -> bool:
        with self._lock:
            return not self._speaking and all(idle() for idle in self._idle)

    def _work(self, stop: threading.Event) -> None:
        while True:
            with self._lock:
                if stop.is_set():
                    return
                text = self._ahead[0] if self._ahead else None
            if text is None or not self._free():  # nothing to make, or a room is listening or speaking
                self._wake.wait(None if text is None else AHEAD_POLL_S)
                self._wake.clear()
                continue
            self._make_ahead(text, stop)

    def _make_ahead(self, text: str, stop: threading.Event) -> None:
        try:
            for _item in self._made(text):
                while not self._free():  # a room needs the machine: wait between sentences
                    if stop.wait(AHEAD_POLL_S):
                        return
        except Exception as err:  # the voice failed: the reply is made when it is said
            _LOGGER.warning("could not make %r ahead: %s", text, err)
        with self._lock:
            if self._ahead and self._ahead[0] == text:
                self._ahead.pop(0)

    def _keep(self, text: str, made: list[tuple[str, Int16Array]]) -> None:
        size = sum(audio.nbytes for _sentence, audio in made)
        if size > self.max_bytes:
            return
        with self._lock:
            if text in self._kept:
                return
            self._kept[text] = made
            self._bytes += size
            while self._bytes > self.max_bytes:
                _old, dropped = self._kept.popitem(last=False)
                self._bytes -= sum(audio.nbytes for _sentence, audio in dropped)


def _frozen(audio: Int16Array) -> Int16Array:
    """A read-only copy: kept audio is shared by every time it is said again."""
    kept = audio.copy()
    kept.setflags(write=False)
    return kept


class FallbackSynth:
    """A voice that falls back to another when it fails, and tries the first again later.

    When the primary voice raises, the rest of the text is spoken with the fallback (the
    sentences already spoken are skipped), and for ``retry_s`` every reply uses the
    fallback; then the primary is tried again. :attr:`degraded` says why while it lasts
    (the metrics and ``/healthz`` show it).
    """

    def __init__(self, primary: Synth, fallback: Synth, *, retry_s: float = 60.0,
                 now: Callable[[], float] = time.monotonic) -> None:
        """Speak with ``primary``; with ``fallback`` while it is failing."""
        self.primary, self.fallback = primary, fallback
        self.retry_s, self._now = retry_s, now
        self._failed_at: float | None = None
        self.degraded: str | None = None  # why the fallback is in use

    def sentences(self, text: str) -> Iterator[tuple[str, Int16Array]]:
        """Yield (sentence, audio) from the primary voice, else the fallback."""
        spoken = 0
        if self._failed_at is None or self._now() - self._failed_at >= self.retry_s:
            try:
                for item in self.primary.sentences(text):
                    yield item
                    spoken += 1
            except Exception as err:  # any failure of the voice: the hub still answers
                if self.degraded is None:
                    _LOGGER.warning("the voice failed (%s); speaking with the fallback voice", err)
                self._failed_at, self.degraded = self._now(), f"voice failed: {err}"
            else:
                if self.degraded is not None:
                    _LOGGER.warning("the voice is back")
                self._failed_at = self.degraded = None
                return
        yield from itertools.islice(self.fallback.sentences(text), spoken, None)


def load_llm(settings: Settings, *, light: bool = False) -> LlmEngine | None:
    """The configured LLM engine (blocking: call from a worker thread).

    Without a model installed and none configured, the hub runs on its grammar alone
    (None, logged once); a configured model that cannot be loaded is an EngineError.
    """
    llm = settings.llm
    if llm.engine == "remote":
        from .remote import RemoteEngine

        assert llm.remote_url is not None
        return RemoteEngine(llm.remote_url, model=llm.remote_model, api_key=llm.remote_api_key,
                            timeout_s=llm.timeout_s, context_size=settings.model.context_size)
    from .llama import ProcessEngine

    path = llm.light_model if light else settings.model.path
    try:
        return ProcessEngine(path, context_size=settings.model.context_size, threads=settings.hardware.num_threads)
    except EngineError as err:
        if path:
            raise
        _LOGGER.warning("no LLM (%s): the hub answers home commands only", err)
        return None


def make_scorer(settings: Settings) -> SpeechScorer:
    """A speech scorer for one stream (``audio.vad_engine``)."""
    if settings.audio.vad_engine == "webrtcvad":
        from .webrtc_vad import WebRtcScorer

        return WebRtcScorer(settings.audio.vad_aggressiveness)
    from .silero_vad import SileroScorer

    return SileroScorer()


def make_echo_canceller(settings: Settings) -> EchoCanceller | None:
    """An echo canceller for one stream (speex in C, or its numpy twin), or None when disabled."""
    if not settings.audio.echo_cancel:
        return None
    from .speex_aec import SpeexEchoCanceller

    return SpeexEchoCanceller(settings.audio.chunk_size, suppress_db=settings.audio.echo_suppress_db,
                              suppress_active_db=settings.audio.echo_suppress_active_db)


def make_wake_word(settings: Settings) -> WakeWordDetector | None:
    """The wake-word detector for one stream, or None when no wake word is used."""
    if not settings.wake_word.enabled:
        return None
    from .wakeword import MicroWakeWordDetector

    return MicroWakeWordDetector(settings.wake_word.model)


__all__ = ["EngineError", "Engines", "load_llm", "make_echo_canceller", "make_scorer", "make_synth",
           "make_transcriber", "make_wake_word"]
