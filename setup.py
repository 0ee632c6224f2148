"""The C extensions of the audio hot path (native/); everything else is in pyproject.toml.

Both are optional: without a compiler (or without libspeexdsp-dev for ``_echo``) the numpy
twins in hub_runtime/audio/ run instead, and the hub says so in one log line.
"""

from setuptools import Extension, setup

FLAGS = ["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"]
HEADERS = ["native/buffer.h"]  # shared by both: a change rebuilds them

setup(
    ext_modules=[
        Extension("hub_runtime._native", sources=["native/duplex_audio.c"], depends=HEADERS,
                  extra_compile_args=FLAGS, libraries=["m"], optional=True),
        Extension("hub_runtime._echo", sources=["native/echo.c"], depends=HEADERS,
                  extra_compile_args=FLAGS, libraries=["speexdsp", "m"], optional=True),
    ]
)
