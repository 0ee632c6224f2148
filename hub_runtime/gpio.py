"""Lights, a haptic motor and buttons on the board's GPIO pins (gpiozero), off by default.

- a **status LED** (RGB, or one LED) shows what the hub does: idle (dim white), listening
  (blue), thinking (cyan pulse), speaking (green), muted (red), error (red blink);
- a **haptic** motor (PWM) pulses on the wake word and on a barge-in;
- a **push-to-talk** button opens a turn without the wake word;
- a **mute** button cuts the microphone (again: restores it), said on MQTT like a
  ``mute`` command.

Everything follows the loop's events (an EventLog listener) and drives the loop only
through its edge methods; gpiozero's button callbacks come from its own thread and are
passed to the event loop. A machine without GPIO gets one log line, never a crash.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable
from typing import Any, Final

from . import protocol as p
from .loop import DialogueLoop
from .settings import GpioSettings

_LOGGER = logging.getLogger(__name__)

# (red, green, blue) per dialogue state; one LED uses the brightest of the three
COLOURS: Final[dict[str, tuple[float, float, float]]] = {
    "idle": (0.05, 0.05, 0.05),
    "listening": (0.0, 0.0, 1.0),
    "thinking": (0.0, 0.6, 0.6),
    "speaking": (0.0, 1.0, 0.0),
    "muted": (1.0, 0.0, 0.0),
    "error": (1.0, 0.0, 0.0),
}
HAPTIC_PULSE_S: Final = 0.08
ERROR_BLINK_S: Final = 0.25


class Gpio:
    """The pins of one hub, bound to one loop."""

    def __init__(self, settings: GpioSettings, loop: DialogueLoop, *, on_mute: Callable[[bool], None] | None = None,
                 pin_factory: Any = None) -> None:
        """Open the configured pins (``pin_factory``: gpiozero's, e.g. a MockFactory in tests).

        Raises nothing: without GPIO on the machine the pins stay closed and one line is logged.
        """
        self.settings = settings
        self.loop = loop
        self.on_mute = on_mute
        self.state = "idle"
        self.led: Any = None
        self.haptic: Any = None
        self.talk: Any = None
        self.mute_button: Any = None
        self._aio = asyncio.get_running_loop()
        self.available = False
        try:
            self._open(pin_factory)
        except Exception as err:  # gpiozero: BadPinFactory, PinInvalidPin, a busy pin ...
            _LOGGER.warning("GPIO is off: %s (%s)", err, type(err).__name__)
            self.close()
            return
        self.available = True
        self.show()

    def _open(self, pin_factory: Any) -> None:
        with warnings.catch_warnings():  # gpiozero warns for every pin library it does not find
            warnings.simplefilter("ignore")
            from gpiozero import LED, PWMLED, RGBLED, Button, PWMOutputDevice

            s = self.settings
            kw = {"pin_factory": pin_factory}
            if s.led_rgb is not None:
                self.led = RGBLED(*s.led_rgb, **kw)
            elif s.led is not None:
                self.led = PWMLED(s.led, **kw) if s.led_pwm else LED(s.led, **kw)
            if s.haptic is not None:
                self.haptic = PWMOutputDevice(s.haptic, **kw)
            if s.talk_button is not None:
                self.talk = Button(s.talk_button, bounce_time=s.bounce_s, **kw)
                self.talk.when_pressed = lambda: self._aio.call_soon_threadsafe(self._talk)
            if s.mute_button is not None:
                self.mute_button = Button(s.mute_button, bounce_time=s.bounce_s, **kw)
                self.mute_button.when_pressed = lambda: self._aio.call_soon_threadsafe(self._toggle_mute)

    # -- in: buttons -----------------------------------------------------------------------------
    def _talk(self) -> None:
        _LOGGER.info("push to talk")
        self.loop.open_session()
        self.pulse()

    def _toggle_mute(self) -> None:
        muted = not self.loop.status().muted
        self.loop.mute(muted)
        _LOGGER.info("microphone %s by the button", "muted" if muted else "on")
        if self.on_mute is not None:
            self.on_mute(muted)
        self.show()

    # -- out: the LED and the motor ------------------------------------------------------------------
    def on_event(self, event: p.Event) -> None:
        """Follow the loop (an EventLog listener)."""
        if isinstance(event, p.StateChanged):
            self.state = event.state
            self.show()
        elif isinstance(event, p.ErrorEvent):
            self.state = "error"
            self.show()
        elif isinstance(event, p.WakeWordDetected | p.BargeIn):
            self.pulse()

    def show(self) -> None:
        """Set the LED for the state (muted wins over everything but an error)."""
        if self.led is None:
            return
        state = "muted" if self.loop.status().muted and self.state != "error" else self.state
        colour = COLOURS.get(state, COLOURS["idle"])
        if self.settings.led_rgb is not None:
            if state == "error":
                self.led.blink(on_time=ERROR_BLINK_S, off_time=ERROR_BLINK_S, on_color=colour, n=None)
            else:
                self.led.color = colour
        elif self.settings.led_pwm:
            self.led.value = max(colour)
        else:
            self.led.value = max(colour) >= 0.5  # a plain LED: on while listening or speaking

    def pulse(self) -> None:
        """One short buzz of the haptic motor (in gpiozero's background thread)."""
        if self.haptic is not None:
            self.haptic.blink(on_time=HAPTIC_PULSE_S, off_time=0.0, n=1, background=True)

    def close(self) -> None:
        """Release every pin."""
        for device in (self.led, self.haptic, self.talk, self.mute_button):
            if device is not None:
                device.close()
        self.led = self.haptic = self.talk = self.mute_button = None
