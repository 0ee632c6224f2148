"""The dashboard in a real headless browser (Debian's chromium, driven by Playwright).

The page loads from a running hub, a command typed in its box turns a light on (the
catalog on the page shows it), the transcript and the latency chart update, and a
screenshot is written to ``out/dashboard.png``. ``scripts/bootstrap --tests`` installs
chromium and Playwright; where that was impossible the test skips and says why.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from hub_runtime.engines import Engines
from hub_runtime.settings import Settings

from .http_helpers import served

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# as root, offline, nothing fetched at start (this machine's network is closed)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def test_a_typed_command_turns_a_light_on_and_the_page_follows(engines: Engines, settings: Settings) -> None:
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (scripts/bootstrap --tests installs Debian's chromium)")
    playwright = pytest.importorskip("playwright.async_api", reason="Playwright is not installed "
                                     "(scripts/bootstrap --tests installs it)")

    async def go() -> None:
        async with served(engines, settings) as (_loop, url), playwright.async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = await browser.new_page(viewport={"width": 1100, "height": 700})
                await page.goto(url + "/")
                kitchen = page.locator('tr[data-entity-id="light.kitchen"] td:nth-child(3)')
                await page.wait_for_selector("text=healthy")
                assert await kitchen.inner_text() == "off"
                await page.fill("#text", "turn on the kitchen light")
                await page.click("button[type=submit]")
                await page.wait_for_function(
                    "document.querySelector('tr[data-entity-id=\"light.kitchen\"] td:nth-child(3)')"
                    ".textContent === 'on'", timeout=20000)
                turn = page.locator("#turns li").first
                await page.wait_for_function("document.querySelectorAll('#turns li').length === 1", timeout=20000)
                assert "turn on the kitchen light" in await turn.inner_text()
                assert await turn.get_attribute("data-intent") == "HassTurnOn"
                await page.wait_for_function("document.getElementById('line').dataset.count === '1'",
                                             timeout=20000)  # the reply's first audio: a point on the chart
                await page.fill("#text", "turn off the kitchen light")
                await page.press("#text", "Enter")
                await page.wait_for_function("document.getElementById('line').dataset.count === '2'",
                                             timeout=20000)
                assert await kitchen.inner_text() == "off"
                assert (await page.get_attribute("#line", "points") or "").count(",") == 2
                out = ROOT / "out"
                out.mkdir(exist_ok=True)
                await page.screenshot(path=str(out / "dashboard.png"), full_page=True)
            finally:
                await browser.close()

    asyncio.run(go())
    assert (ROOT / "out" / "dashboard.png").stat().st_size > 10_000
