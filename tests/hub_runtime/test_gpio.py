"""GPIO with gpiozero's MockFactory: buttons drive the real loop, the LED and the motor follow it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from gpiozero import Device
from gpiozero.pins.mock import MockFactory, MockPWMPin

from hub_runtime import protocol as p
from hub_runtime.agent import Agent
from hub_runtime.audio.format import RATE, Int16Array
from hub_runtime.driver import drive
from hub_runtime.engines import Engines
from hub_runtime.events import EventLog
from hub_runtime.gpio import COLOURS, Gpio
from hub_runtime.runner import running_loop
from hub_runtime.settings import GpioSettings, Settings, SettingsError, WakeWordSettings, parse

RGB = (5, 6, 13)
HAPTIC, TALK, MUTE = 12, 17, 27


@pytest.fixture
def mock_pins() -> Iterator[MockFactory]:
    factory = MockFactory(pin_class=MockPWMPin)
    previous, Device.pin_factory = Device.pin_factory, factory
    try:
        yield factory
    finally:
        factory.reset()
        Device.pin_factory = previous


def pins(**kw: Any) -> GpioSettings:
    return GpioSettings(enabled=True, led_rgb=RGB, haptic=HAPTIC, talk_button=TALK, mute_button=MUTE, **kw)


def settle() -> None:
    """gpiozero's background blink thread: give it a moment to drive the pin."""
    time.sleep(0.3)


def test_the_led_and_the_motor_follow_the_loop(mock_pins: MockFactory, engines: Engines,
                                               settings: Settings) -> None:
    muted: list[bool] = []

    async def go() -> None:
        async with running_loop(settings, EventLog(), realtime=False, mqtt=False, engines=engines,
                                agent=Agent.from_settings(settings)) as loop:
            gpio = Gpio(pins(), loop, on_mute=muted.append)
            assert gpio.available
            led = gpio.led
            assert led.color == COLOURS["idle"]
            for state in ("listening", "thinking", "speaking"):
                gpio.on_event(p.StateChanged(state=state))
                assert led.color == COLOURS[state], state
            motor = mock_pins.pin(HAPTIC)
            gpio.on_event(p.BargeIn(onset_ms=0))
            settle()
            assert any(s.state == 1 for s in motor.states) and motor.state == 0  # one pulse, then off
            # the mute button: the microphone off, the LED red, MQTT told; again: back
            mock_pins.pin(MUTE).drive_low()
            await asyncio.sleep(0)
            assert loop.status().muted and muted == [True] and led.color == COLOURS["muted"]
            mock_pins.pin(MUTE).drive_high()
            mock_pins.pin(MUTE).drive_low()
            await asyncio.sleep(0)
            assert not loop.status().muted and muted == [True, False] and led.color == COLOURS["speaking"]
            gpio.on_event(p.ErrorEvent(message="boom"))
            settle()
            assert any(s.state == 1 for s in mock_pins.pin(RGB[0]).states)  # blinking red
            gpio.close()

    asyncio.run(go())


def test_push_to_talk_opens_a_turn_without_the_wake_word(mock_pins: MockFactory, engines: Engines,
                                                         voice: Callable[..., Int16Array]) -> None:
    """With the wake word on, a command is ignored unless the button was pressed first."""
    settings = Settings(wake_word=WakeWordSettings(enabled=True), gpio=pins())
    speech = voice("turn on the kitchen light")
    gap = np.zeros(RATE, np.int16)
    mic = np.concatenate([gap, speech, gap])

    async def go(press: bool) -> str:
        agent = Agent.from_settings(settings)
        async with running_loop(settings, EventLog(), realtime=False, mqtt=False, engines=engines,
                                agent=agent) as loop:
            n = loop.chunk
            pressed = False

            def source(position: int) -> Int16Array | None:
                nonlocal pressed
                if press and not pressed and position >= 500:
                    mock_pins.pin(TALK).drive_low()
                    pressed = True
                i = position // settings.frame_ms
                frame = mic[i * n:(i + 1) * n]
                return None if i * n >= len(mic) + 2 * RATE else np.pad(frame, (0, n - len(frame)))

            await drive(loop, source, realtime=False)
        light = agent.model.catalog.get("light.kitchen")
        assert light is not None
        return light.state

    assert asyncio.run(go(press=False)) == "off"
    assert asyncio.run(go(press=True)) == "on"


def test_no_gpio_on_the_machine_is_one_log_line(caplog: pytest.LogCaptureFixture, engines: Engines,
                                                settings: Settings) -> None:
    async def go() -> None:
        async with running_loop(settings, EventLog(), realtime=False, mqtt=False, engines=engines,
                                agent=Agent.from_settings(settings)) as loop:
            gpio = Gpio(pins(), loop)  # this machine has no pin library: gpiozero's default fails
            assert not gpio.available
            gpio.on_event(p.StateChanged(state="speaking"))  # and nothing breaks
            gpio.pulse()

    with caplog.at_level(logging.WARNING, logger="hub_runtime.gpio"):
        asyncio.run(go())
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["GPIO is off"]


def test_a_plain_led_is_on_while_listening_or_speaking(mock_pins: MockFactory, engines: Engines,
                                                       settings: Settings) -> None:
    async def go() -> None:
        async with running_loop(settings, EventLog(), realtime=False, mqtt=False, engines=engines,
                                agent=Agent.from_settings(settings)) as loop:
            gpio = Gpio(replace(GpioSettings(enabled=True), led=4, led_pwm=False), loop)
            assert gpio.led.value == 0
            gpio.on_event(p.StateChanged(state="listening"))
            assert gpio.led.value == 1
            gpio.close()

    asyncio.run(go())


@pytest.mark.parametrize(("gpio", "message"), [
    ({"led": 40}, "gpio.led: 40 is not a BCM GPIO pin (allowed 0 to 27)"),
    ({"led_rgb": [1, 2]}, "gpio.led_rgb: [1, 2] is not three pins (red, green, blue)"),
    ({"led": 5, "talk_button": 5}, "gpio.talk_button: pin 5 is already gpio.led"),
    ({"led_rgb": [5, 6, 13], "mute_button": 13}, "gpio.led_rgb[2]: pin 13 is already gpio.mute_button"),
    ({"led": 4, "led_rgb": [5, 6, 13]}, "gpio.led: set either gpio.led or gpio.led_rgb, not both"),
    ({"haptic": "twelve"}, "gpio.haptic: 'twelve' is not a pin number"),
])
def test_gpio_settings_name_the_key_and_the_reason(gpio: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        parse({"gpio": gpio})
    assert str(err.value).startswith(message.split(":")[0]) and message.split(": ", 1)[1] in str(err.value)
