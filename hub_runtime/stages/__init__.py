"""The loop's stages, one job each: vad, asr, turn, router, tts, output."""
