"""A spoken command WAV fed to the real hub turns a light on in Home Assistant.

Real mosquitto, the real ``hub-runtime run --input WAV --mqtt`` process (pocketsphinx,
Piper), Home Assistant core with its real MQTT integration and this component.
"""

from __future__ import annotations

from pathlib import Path

from homeassistant.core import HomeAssistant

from ..conftest import BASE, HubProcess, collect, hub_config, hub_entry, speech_wav, wait_until


async def test_spoken_command_turns_on_the_light_and_the_hub_speaks_the_result(
        hass: HomeAssistant, home: dict[str, str], broker: object, tmp_path: Path) -> None:
    wav = speech_wav(tmp_path, "turn on the kitchen light", lead_s=4.0, tail_s=2.0)
    responses = await collect(hass, f"{BASE}/event/response")
    results = await collect(hass, f"{BASE}/intent/result")
    entry = hub_entry(hass)
    assert await hass.config_entries.async_setup(entry.entry_id)
    await hass.async_block_till_done()
    hub = HubProcess(hub_config(tmp_path, broker.port), wav, linger_s=8, log=tmp_path / "hub.log")  # type: ignore[attr-defined]
    hub.start()
    try:
        await wait_until(hass, lambda: hass.states.get(home["kitchen"]).state == "on", 90,
                         "the kitchen light turned on by speech")
        await wait_until(hass, lambda: results.json() and responses.json(), 30, "the hub's reply")
        result = results.json()[0]
        assert result["success"] is True and result["targets"] == [home["kitchen"]]
        said = responses.json()[-1]["text"]
        assert said and "did not answer" not in said  # the hub had Home Assistant's result
        assert hass.states.get(home["porch"]).state == "off"
        client = entry.runtime_data
        await wait_until(hass, lambda: client.last_transcript is not None, 10, "the transcript sensor")
        assert "kitchen" in client.last_transcript
    finally:
        code = hub.stop()
    assert code in (0, -15), (tmp_path / "hub.log").read_text()[-3000:]
