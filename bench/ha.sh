#!/usr/bin/env bash
# Benchmark: a hub's intent publish -> the entity's state change in Home Assistant (p50/p95).
# Needs scripts/bootstrap (both venvs). Prints the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv-ha/bin/python -m pytest -p no:cacheprovider -o asyncio_mode=auto \
  -o asyncio_default_fixture_loop_scope=function -o filterwarnings=ignore::DeprecationWarning \
  -q -s tests/components/duplex_hub/bench_intent_latency.py "$@"
