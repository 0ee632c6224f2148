"""The command line: ``hub-runtime ask | run | demo``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import replace

from .catalog import CatalogError
from .engines.base import EngineError
from .errors import CliError
from .settings import Settings, SettingsError, load
from .understanding import Reply

EXIT_USAGE = 2


def _settings(args: argparse.Namespace) -> Settings:
    settings = load(args.config)
    if getattr(args, "catalog", None):
        settings = replace(settings, catalog=args.catalog)
    return settings


async def _ask(settings: Settings, text: str) -> Reply:
    """One text turn through the same understanding as speech (the LLM loaded only if needed)."""
    from .agent import Agent
    from .engines import Engines
    from .understanding import Understanding

    agent = await asyncio.to_thread(Agent.from_settings, settings)
    understanding = Understanding.build(settings, agent, None)
    engines = await Engines.load(settings, speech=False, llm=understanding.needs_llm(text))
    try:
        understanding = Understanding.build(settings, agent, engines.llm)
        return await understanding.answer(text)
    finally:
        await engines.close()


def _cmd_ask(args: argparse.Namespace) -> int:
    reply = asyncio.run(_ask(_settings(args), args.text))
    if args.json:
        print(json.dumps(reply.to_dict(), ensure_ascii=False))
    else:
        print(reply.response)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .runner import run_command

    return run_command(_settings(args), args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(_settings(args), args)


def _cmd_satellite(args: argparse.Namespace) -> int:
    from pathlib import Path

    import aiohttp

    from .audio.format import AudioFormatError, read_wav, write_wav
    from .satellite import satellite_url, stream_file, stream_live

    url = satellite_url(args.hub, args.site, args.area)
    try:
        if args.input is None:
            asyncio.run(stream_live(url, token=args.token))
            return 0
        try:
            mic = read_wav(args.input)
        except AudioFormatError as err:
            raise CliError(str(err)) from None
        played = asyncio.run(stream_file(url, mic, token=args.token, linger_s=args.linger))
    except (aiohttp.ClientError, ConnectionError, OSError) as err:
        raise CliError(f"the hub at {url} did not take the room: {err}") from None
    if args.output:
        write_wav(Path(args.output), played)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every sub-command."""
    parser = argparse.ArgumentParser(prog="hub-runtime", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", "-c", help="configuration YAML (default: embedded)")
        p.add_argument("--catalog", help="home catalog YAML (overrides the config)")

    ask = sub.add_parser("ask", help="answer one text query")
    common(ask)
    ask.add_argument("--json", action="store_true", help="print the reply as one JSON object")
    ask.add_argument("text")
    ask.set_defaults(func=_cmd_ask)

    run = sub.add_parser("run", help="run the voice loop (live, or on a WAV file)")
    common(run)
    run.add_argument("--input", help="WAV file used as the microphone")
    run.add_argument("--output", help="WAV file for the hub's speech (same timeline)")
    run.add_argument("--events", help="JSON-lines event log")
    run.add_argument("--realtime", action="store_true", help="feed the file at real speed")
    run.add_argument("--echo", help="simulated room echo DELAY_MS:GAIN, e.g. 40:0.3")
    run.add_argument("--mqtt", action=argparse.BooleanOptionalAction, default=None,
                     help="bridge to MQTT (default: on live, off for a file; a file run "
                          "with --mqtt goes at real speed)")
    run.add_argument("--http", action=argparse.BooleanOptionalAction, default=None,
                     help="serve /healthz, /metrics and the dashboard (default: http.enabled live, off "
                          "for a file; a file run with --http goes at real speed)")
    run.add_argument("--linger", type=float, default=0.0, metavar="S",
                     help="keep running S seconds after the input file ends")
    run.set_defaults(func=_cmd_run)

    sat = sub.add_parser("satellite", help="be a room of a hub: this microphone to it, its voice back")
    sat.add_argument("--hub", default="ws://127.0.0.1:8321", help="the hub's web server (default: %(default)s)")
    sat.add_argument("--site", required=True, help="this room's site id, e.g. kitchen")
    sat.add_argument("--area", help="the room's name in the home, e.g. Kitchen")
    sat.add_argument("--token", help="the hub's http.token, if it has one")
    sat.add_argument("--input", help="a WAV file as the microphone (sent at real speed)")
    sat.add_argument("--output", help="WAV of what the hub played in the room")
    sat.add_argument("--linger", type=float, default=3.0, metavar="S", help="silence sent after the input")
    sat.set_defaults(func=_cmd_satellite)

    demo = sub.add_parser("demo", help="a scripted spoken conversation through the real loop")
    common(demo)
    demo.add_argument("--out", default="out/demo.wav", help="WAV of the whole conversation")
    demo.add_argument("--fast", action="store_true", help="do not wait for real time")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hub-runtime`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args))
    except (SettingsError, CatalogError, CliError, EngineError) as err:
        print(f"hub-runtime: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
