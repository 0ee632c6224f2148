"""The C extension of the audio hot path (native/); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "hub_runtime._native",
            sources=["native/duplex_audio.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-missing-braces"],
            libraries=["m"],
            optional=True,  # no compiler: the numpy twins (hub_runtime/audio/twin.py) run instead
        )
    ]
)
