"""TTS stage: reply text becomes audio, one sentence at a time in a worker thread.

Each sentence is sent to the output as soon as it is made, while later ones are
still being synthesised. An interruption cancels the stage's data task between
sentences (the pipeline base does that), so pending synthesis is dropped. Every
SpeakFrame becomes exactly one utterance closed by a ``last`` frame, even when the
voice fails on it (the error is reported, the utterance is empty).

Consumes: SpeakFrame. Emits: TTSAudioFrame (``last`` closes an utterance).
"""

from __future__ import annotations

import asyncio
import itertools

import numpy as np

from ..audio.format import AudioChunk
from ..audio.sounds import chime
from ..engines.base import Synth
from ..frames import Frame, SpeakFrame, TTSAudioFrame
from ..pipeline import Direction, Stage

_utterances = itertools.count(1)


class TtsStage(Stage):
    """Streams synthesis sentence by sentence."""

    def __init__(self, synth: Synth) -> None:
        """Speak with this voice."""
        super().__init__("tts")
        self.synth = synth

    async def process(self, frame: Frame, direction: Direction) -> None:
        """Synthesise SpeakFrames; forward the rest."""
        if not isinstance(frame, SpeakFrame):
            await self.push(frame, direction)
            return
        utterance = next(_utterances)
        last = TTSAudioFrame(audio=AudioChunk(np.zeros(0, np.int16)), utterance=utterance, text=frame.text,
                             last=True)
        try:
            if frame.chime:
                await self.push(TTSAudioFrame(audio=AudioChunk(chime()), utterance=utterance))
            sentences = iter(self.synth.sentences(frame.text))
            while True:
                item = await asyncio.to_thread(next, sentences, None)
                if item is None:
                    break
                text, audio = item
                await self.push(TTSAudioFrame(audio=AudioChunk(audio), utterance=utterance, text=text))
        except Exception:
            await self.push(last)  # the utterance still ends, so the reply is not left open
            raise
        await self.push(last)
