"""Configuration: one YAML file validated once with voluptuous into frozen dataclasses.

A bad file raises :class:`SettingsError` whose message is one line naming the key path,
what is wrong and what is allowed, e.g.
``audio.chunk_size: 500 is not a multiple of 160 samples (10 ms)``.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final, TypeVar

import voluptuous as vol
import yaml

from .audio.format import RATE

SAMPLES_PER_10MS: Final = RATE // 100
PACKAGE_CONFIG: Final = Path(__file__).resolve().parent / "data"
DEFAULT_CATALOG: Final = PACKAGE_CONFIG / "catalog.yaml"


def state_dir() -> Path:
    """Where the hub keeps state between runs: ``$XDG_STATE_HOME/duplex_hub`` (``~/.local/state``)."""
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "duplex_hub"


class SettingsError(ValueError):
    """A configuration that cannot be used; str() is the one-line explanation."""


def _chunk_size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise vol.Invalid(f"{value!r} is not a whole number of samples")
    if value <= 0 or value % SAMPLES_PER_10MS:
        raise vol.Invalid(
            f"{value} is not a multiple of {SAMPLES_PER_10MS} samples (10 ms)"
        )
    if value > 3 * SAMPLES_PER_10MS * 3:  # webrtcvad takes 10, 20 or 30 ms frames
        raise vol.Invalid(f"{value} is more than {9 * SAMPLES_PER_10MS} samples (90 ms)")
    return value


def _number(lo: float, hi: float, *, integer: bool = False) -> Any:
    def check(value: Any) -> Any:
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise vol.Invalid(f"{value!r} is not a {'whole number' if integer else 'number'}")
        if not lo <= value <= hi:
            raise vol.Invalid(f"{value} is out of range (allowed {lo} to {hi})")
        return value

    return check


def _one_of(*allowed: str) -> Any:
    def check(value: Any) -> str:
        if value not in allowed:
            raise vol.Invalid(f"{value!r} is not allowed (allowed: {', '.join(allowed)})")
        return str(value)

    return check


def _pin(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise vol.Invalid(f"{value!r} is not a pin number")
    if not 0 <= value <= 27:
        raise vol.Invalid(f"{value} is not a BCM GPIO pin (allowed 0 to 27)")
    return value


def _rgb_pins(value: Any) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise vol.Invalid(f"{value!r} is not three pins (red, green, blue)")
    red, green, blue = (_pin(v) for v in value)
    if red is None or green is None or blue is None:
        raise vol.Invalid(f"{value!r} is not three pins (red, green, blue)")
    return red, green, blue


def _optional_path(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise vol.Invalid(f"{value!r} is not a file path")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise vol.Invalid(f"{value!r} is not true or false")
    return value


@dataclass(frozen=True)
class AudioSettings:
    """Microphone, speaker and voice activity detection."""

    chunk_size: int = 480  # samples per frame (30 ms at 16 kHz)
    vad_engine: str = "silero"  # webrtcvad | silero
    vad_threshold: float = 0.78  # smoothed speech ratio (webrtcvad) or probability (silero)
    vad_aggressiveness: int = 2  # webrtcvad mode 0..3
    vad_start_ms: int = 60  # sustained speech before speech_start
    vad_stop_ms: int = 240  # sustained silence before speech_end
    echo_cancel: bool = True  # speex AEC against the exact playback reference
    echo_suppress_db: int = -40  # residual echo suppression while only the hub talks (dB, <= 0)
    echo_suppress_active_db: int = -15  # ... while someone talks over it: keeps barge-ins audible
    device_rate: int = 16000  # the sound device's rate (Hz); resampled to and from 16 kHz
    input_device: str | None = None  # sounddevice name or index; None = default
    output_device: str | None = None


@dataclass(frozen=True)
class AsrSettings:
    """The two-tier recogniser: pocketsphinx over the home grammar, Whisper as second tier."""

    beam_size: int = 1  # Whisper beam
    second_tier: str = "whisper"  # whisper | none
    whisper_model: str | None = None  # CTranslate2 model dir; None = bundled tiny.en
    confidence: float = 0.95  # with second_tier none: the grammar tier's words count at or above this
    max_utterance_s: float = 12.0


@dataclass(frozen=True)
class TurnSettings:
    """End of turn and barge-in timings."""

    complete_silence_ms: int = 90  # silence that ends a turn whose words are a full command
    short_silence_ms: int = 300  # ... a full command of one word ("stop" may go on: "stop the mower"), or over the hub
    incomplete_silence_ms: int = 650  # silence that ends any other turn
    barge_in_ms: int = 30  # user speech during hub speech before playback pauses
    backchannel_ms: int = 400  # speech shorter than this (and no command) resumes playback


@dataclass(frozen=True)
class ModelSettings:
    """The local LLM (used by the LLM dialogue issue)."""

    path: str | None = None
    max_new_tokens: int = 64
    repetition_penalty: float = 1.2
    temperature: float = 0.7
    context_size: int = 2048


@dataclass(frozen=True)
class HardwareSettings:
    """Compute resources."""

    num_threads: int = 2
    use_npu: bool = False


@dataclass(frozen=True)
class TtsSettings:
    """Speech synthesis."""

    engine: str = "piper"  # piper | espeak
    voice: str | None = None  # Piper .onnx; None = bundled en_US-joe-medium
    length_scale: float = 1.0
    volume: float = 1.0


@dataclass(frozen=True)
class WakeWordSettings:
    """Optional wake word; inside a session none is needed."""

    enabled: bool = False
    model: str = "okay_nabu"
    session_timeout_s: float = 8.0  # silence after the hub's last reply that ends a session


@dataclass(frozen=True)
class LlmSettings:
    """The LLM dialogue for what the home grammar does not match (model.* is the model)."""

    enabled: bool = True
    engine: str = "local"  # local (llama.cpp in process) | remote (OpenAI-compatible server)
    prefer_local: bool = True  # grammar first; false: every turn goes to the LLM
    persona: str = "assistant"  # assistant | friend | professor | custom
    custom_prompt: str | None = None
    history_turns: int = 8  # the most recent turns kept (fewer when the context is full)
    remote_url: str | None = None  # e.g. http://127.0.0.1:8080/v1
    remote_model: str = "local"
    remote_api_key: str | None = None
    timeout_s: float = 10.0  # of a remote answer
    memory: str | None = None  # preferences file; None = $XDG_STATE_HOME/duplex_hub/preferences.json
    frigate_topic: str | None = None  # e.g. frigate/events: camera objects as context
    light_model: str | None = None  # a smaller GGUF for memory pressure


@dataclass(frozen=True)
class MqttSettings:
    """The MQTT link: intents out, commands in (see docs/protocol.md)."""

    enabled: bool = True
    host: str | None = None  # None = start the embedded amqtt broker on 127.0.0.1
    port: int = 1883  # of the broker (also the embedded one's)
    protocol: str = "3.1.1"  # 3.1.1 | 5
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_certs: str | None = None  # PEM bundle; None = the system's
    certfile: str | None = None  # client certificate (PEM)
    keyfile: str | None = None
    tls_insecure: bool = False  # skip the host name check (self-signed test brokers)
    hub_id: str = "duplex_hub"  # base topic duplex_hub/<hub_id>
    name: str = "Duplex Hub"
    hermes: bool = True  # also speak the Hermes (Rhasspy/Snips) protocol
    outbox: str | None = None  # SQLite file; None = $XDG_STATE_HOME/duplex_hub/outbox-<hub_id>.db
    outbox_max: int = 10000  # intents kept while the broker is away (oldest dropped)
    keepalive_s: int = 30
    reconnect_max_s: float = 30.0  # back-off ceiling
    max_payload_bytes: int = 65536  # larger inbound payloads are dropped (the catalog: 16x)


@dataclass(frozen=True)
class HttpSettings:
    """The hub's own web server: /healthz, /metrics and the dashboard (``http.py``)."""

    enabled: bool = True  # on for a live run; a file run serves only with --http
    host: str = "127.0.0.1"  # anything but a loopback address needs a token
    port: int = 8321
    token: str | None = None  # bearer token (header, or ?token= for the dashboard page)
    stall_ms: int = 1000  # the loop counts as stalled when a tick or the event loop is this late
    max_cpu_percent: int = 95  # of all cores, over 2 s: above it the LLM is not started ("I'm busy")
    max_memory_mb: int | None = None  # resident memory; above it, too (None: no limit)
    watchdog: bool = True  # systemd READY/WATCHDOG pings while healthy (when NOTIFY_SOCKET is set)


@dataclass(frozen=True)
class GpioSettings:
    """LEDs, a haptic motor and buttons on BCM pin numbers (``gpio.py``); off by default."""

    enabled: bool = False
    led: int | None = None  # one status LED
    led_pwm: bool = True  # ... dimmable (PWM)
    led_rgb: tuple[int, int, int] | None = None  # or an RGB LED: red, green, blue pins
    haptic: int | None = None  # a vibration motor (PWM)
    talk_button: int | None = None  # push to talk: opens a turn without the wake word
    mute_button: int | None = None  # cuts the microphone (pressed again: restores it)
    bounce_s: float = 0.05  # button debounce


@dataclass(frozen=True)
class Settings:
    """The whole validated configuration."""

    audio: AudioSettings = AudioSettings()
    asr: AsrSettings = AsrSettings()
    turn: TurnSettings = TurnSettings()
    model: ModelSettings = ModelSettings()
    hardware: HardwareSettings = HardwareSettings()
    tts: TtsSettings = TtsSettings()
    wake_word: WakeWordSettings = WakeWordSettings()
    mqtt: MqttSettings = MqttSettings()
    llm: LlmSettings = LlmSettings()
    http: HttpSettings = HttpSettings()
    gpio: GpioSettings = GpioSettings()
    catalog: str | None = None  # path; None = the bundled example home
    language: str = "en"
    site_id: str = "default"
    site_area: str | None = None  # the room the hub is in, for "turn on the lights"

    @property
    def frame_ms(self) -> int:
        """Frame length in milliseconds."""
        return self.audio.chunk_size * 1000 // RATE


SCHEMA: Final = vol.Schema(
    {
        vol.Optional("audio", default=dict): vol.Schema(
            {
                vol.Optional("chunk_size"): _chunk_size,
                vol.Optional("vad_engine"): _one_of("webrtcvad", "silero"),
                vol.Optional("vad_threshold"): _number(0.0, 1.0),
                vol.Optional("vad_aggressiveness"): _number(0, 3, integer=True),
                vol.Optional("vad_start_ms"): _number(0, 2000, integer=True),
                vol.Optional("vad_stop_ms"): _number(30, 5000, integer=True),
                vol.Optional("echo_cancel"): _bool,
                vol.Optional("echo_suppress_db"): _number(-90, 0, integer=True),
                vol.Optional("echo_suppress_active_db"): _number(-90, 0, integer=True),
                vol.Optional("device_rate"): _number(8000, 192000, integer=True),
                vol.Optional("input_device"): vol.Any(None, vol.Coerce(str)),
                vol.Optional("output_device"): vol.Any(None, vol.Coerce(str)),
            }
        ),
        vol.Optional("asr", default=dict): vol.Schema(
            {
                vol.Optional("beam_size"): _number(1, 10, integer=True),
                vol.Optional("second_tier"): _one_of("whisper", "none"),
                vol.Optional("whisper_model"): _optional_path,
                vol.Optional("confidence"): _number(0.0, 1.0),
                vol.Optional("max_utterance_s"): _number(1.0, 60.0),
            }
        ),
        vol.Optional("turn", default=dict): vol.Schema(
            {
                vol.Optional("complete_silence_ms"): _number(0, 5000, integer=True),
                vol.Optional("short_silence_ms"): _number(0, 5000, integer=True),
                vol.Optional("incomplete_silence_ms"): _number(0, 10000, integer=True),
                vol.Optional("barge_in_ms"): _number(0, 2000, integer=True),
                vol.Optional("backchannel_ms"): _number(0, 5000, integer=True),
            }
        ),
        vol.Optional("model", default=dict): vol.Schema(
            {
                vol.Optional("path"): _optional_path,
                vol.Optional("max_new_tokens"): _number(1, 4096, integer=True),
                vol.Optional("repetition_penalty"): _number(0.5, 3.0),
                vol.Optional("temperature"): _number(0.0, 5.0),
                vol.Optional("context_size"): _number(256, 131072, integer=True),
            }
        ),
        vol.Optional("hardware", default=dict): vol.Schema(
            {
                vol.Optional("num_threads"): _number(1, 64, integer=True),
                vol.Optional("use_npu"): _bool,
            }
        ),
        vol.Optional("tts", default=dict): vol.Schema(
            {
                vol.Optional("engine"): _one_of("piper", "espeak"),
                vol.Optional("voice"): _optional_path,
                vol.Optional("length_scale"): _number(0.3, 3.0),
                vol.Optional("volume"): _number(0.0, 4.0),
            }
        ),
        vol.Optional("wake_word", default=dict): vol.Schema(
            {
                vol.Optional("enabled"): _bool,
                vol.Optional("model"): _one_of("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"),
                vol.Optional("session_timeout_s"): _number(0.0, 600.0),
            }
        ),
        vol.Optional("llm", default=dict): vol.Schema(
            {
                vol.Optional("enabled"): _bool,
                vol.Optional("engine"): _one_of("local", "remote"),
                vol.Optional("prefer_local"): _bool,
                vol.Optional("persona"): _one_of("assistant", "friend", "professor", "custom"),
                vol.Optional("custom_prompt"): vol.Any(None, vol.All(str, vol.Length(min=1, max=4000))),
                vol.Optional("history_turns"): _number(0, 100, integer=True),
                vol.Optional("remote_url"): vol.Any(None, vol.All(str, vol.Match(
                    r"^https?://", msg="is not an http(s) URL"))),
                vol.Optional("remote_model"): vol.All(str, vol.Length(min=1)),
                vol.Optional("remote_api_key"): vol.Any(None, str),
                vol.Optional("timeout_s"): _number(0.1, 600.0),
                vol.Optional("memory"): _optional_path,
                vol.Optional("frigate_topic"): vol.Any(None, vol.All(str, vol.Length(min=1))),
                vol.Optional("light_model"): _optional_path,
            }
        ),
        vol.Optional("mqtt", default=dict): vol.Schema(
            {
                vol.Optional("enabled"): _bool,
                vol.Optional("host"): vol.Any(None, vol.All(str, vol.Length(min=1, msg="is empty"))),
                vol.Optional("port"): _number(1, 65535, integer=True),
                vol.Optional("protocol"): vol.All(vol.Coerce(str), _one_of("3.1.1", "5")),
                vol.Optional("username"): vol.Any(None, str),
                vol.Optional("password"): vol.Any(None, str),
                vol.Optional("tls"): _bool,
                vol.Optional("ca_certs"): _optional_path,
                vol.Optional("certfile"): _optional_path,
                vol.Optional("keyfile"): _optional_path,
                vol.Optional("tls_insecure"): _bool,
                vol.Optional("hub_id"): vol.All(str, vol.Match(r"^[A-Za-z0-9_-]+$", msg="is not a plain id "
                                                              "(letters, digits, _ and -)")),
                vol.Optional("name"): vol.All(str, vol.Length(min=1, max=100)),
                vol.Optional("hermes"): _bool,
                vol.Optional("outbox"): _optional_path,
                vol.Optional("outbox_max"): _number(1, 10_000_000, integer=True),
                vol.Optional("keepalive_s"): _number(5, 3600, integer=True),
                vol.Optional("reconnect_max_s"): _number(0.1, 3600.0),
                vol.Optional("max_payload_bytes"): _number(1024, 16 * 1024 * 1024, integer=True),
            }
        ),
        vol.Optional("http", default=dict): vol.Schema(
            {
                vol.Optional("enabled"): _bool,
                vol.Optional("host"): vol.All(str, vol.Length(min=1, msg="is empty")),
                vol.Optional("port"): _number(0, 65535, integer=True),
                vol.Optional("token"): vol.Any(None, vol.All(str, vol.Length(min=16, msg="is shorter than 16 "
                                                                              "characters"))),
                vol.Optional("stall_ms"): _number(100, 60000, integer=True),
                vol.Optional("max_cpu_percent"): _number(10, 100, integer=True),
                vol.Optional("max_memory_mb"): vol.Any(None, _number(64, 1_000_000, integer=True)),
                vol.Optional("watchdog"): _bool,
            }
        ),
        vol.Optional("gpio", default=dict): vol.Schema(
            {
                vol.Optional("enabled"): _bool,
                vol.Optional("led"): _pin,
                vol.Optional("led_pwm"): _bool,
                vol.Optional("led_rgb"): _rgb_pins,
                vol.Optional("haptic"): _pin,
                vol.Optional("talk_button"): _pin,
                vol.Optional("mute_button"): _pin,
                vol.Optional("bounce_s"): _number(0.0, 1.0),
            }
        ),
        vol.Optional("catalog"): _optional_path,
        vol.Optional("language"): _one_of("en"),
        vol.Optional("site_id"): vol.All(str, vol.Match(r"^[A-Za-z0-9_-]+$", msg="is not a plain id")),
        vol.Optional("site_area"): vol.Any(None, str),
    }
)

_SECTIONS: Final = {
    "audio": AudioSettings,
    "asr": AsrSettings,
    "turn": TurnSettings,
    "model": ModelSettings,
    "hardware": HardwareSettings,
    "tts": TtsSettings,
    "wake_word": WakeWordSettings,
    "mqtt": MqttSettings,
    "llm": LlmSettings,
    "http": HttpSettings,
    "gpio": GpioSettings,
}

_T = TypeVar("_T")


def describe_invalid(err: vol.Invalid, root: str = "") -> str:
    """One line for a voluptuous error: the key path, then what is wrong."""
    if isinstance(err, vol.MultipleInvalid):
        err = err.errors[0]
    path = ".".join(str(p) for p in err.path)
    if root:
        return f"{root}: {path}: {err.msg}" if path else f"{root}: {err.msg}"
    return f"{path}: {err.msg}" if path else err.msg


def _describe(err: vol.Invalid) -> str:
    if isinstance(err, vol.MultipleInvalid):
        err = err.errors[0]
    path = ".".join(str(p) for p in err.path)
    msg = err.msg
    if msg == "extra keys not allowed":
        parent = err.path[:-1]
        section = _SECTIONS.get(str(parent[0])) if parent else None
        allowed = (
            [f.name for f in fields(section)]
            if section
            else [k.schema for k in SCHEMA.schema]
        )
        return f"{path}: unknown key (allowed: {', '.join(sorted(map(str, allowed)))})"
    if msg.startswith("expected a dictionary"):
        return f"{path or 'config'}: is not a mapping of keys"
    return describe_invalid(err)


def _section(cls: type[_T], values: dict[str, Any]) -> _T:
    return cls(**values)


def parse(data: Any, *, base_dir: Path | None = None) -> Settings:
    """Validate a parsed config document into :class:`Settings`."""
    if data is None:
        data = {}
    try:
        valid = SCHEMA(data)
    except vol.Invalid as err:
        raise SettingsError(_describe(err)) from None
    kwargs: dict[str, Any] = {name: _section(cls, valid[name]) for name, cls in _SECTIONS.items()}
    for key in ("language", "site_id", "site_area", "catalog"):
        if key in valid:
            kwargs[key] = valid[key]
    settings = Settings(**kwargs)
    if settings.turn.complete_silence_ms > settings.turn.incomplete_silence_ms:
        raise SettingsError(
            "turn.complete_silence_ms: "
            f"{settings.turn.complete_silence_ms} is longer than turn.incomplete_silence_ms "
            f"({settings.turn.incomplete_silence_ms}); it must not be"
        )
    if settings.mqtt.protocol == "5" and settings.mqtt.host is None:
        raise SettingsError("mqtt.protocol: 5 needs mqtt.host (the embedded broker speaks 3.1.1 only)")
    if settings.llm.engine == "remote" and not settings.llm.remote_url:
        raise SettingsError("llm.engine: remote needs llm.remote_url (an OpenAI-compatible server)")
    if settings.llm.persona == "custom" and not settings.llm.custom_prompt:
        raise SettingsError("llm.persona: custom needs llm.custom_prompt")
    if settings.mqtt.tls and settings.mqtt.host is None:
        raise SettingsError("mqtt.tls: true needs mqtt.host (the embedded broker listens without TLS)")
    if settings.http.enabled and settings.http.token is None and not _loopback(settings.http.host):
        raise SettingsError(f"http.token: needed when http.host ({settings.http.host}) is not a loopback "
                            "address (or set http.host: 127.0.0.1)")
    g = settings.gpio
    used = [("led", g.led), ("haptic", g.haptic), ("talk_button", g.talk_button), ("mute_button", g.mute_button)]
    used += [(f"led_rgb[{i}]", pin) for i, pin in enumerate(g.led_rgb or ())]
    seen: dict[int, str] = {}
    for key, pin in used:
        if pin is not None and pin in seen:
            raise SettingsError(f"gpio.{key}: pin {pin} is already gpio.{seen[pin]}")
        if pin is not None:
            seen[pin] = key
    if g.led is not None and g.led_rgb is not None:
        raise SettingsError("gpio.led: set either gpio.led or gpio.led_rgb, not both")
    if base_dir is not None:
        settings = _resolve_paths(settings, base_dir)
    return settings


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _resolve_paths(settings: Settings, base_dir: Path) -> Settings:
    from dataclasses import replace

    def fix(p: str | None) -> str | None:
        if p is None or Path(p).is_absolute():
            return p
        return str((base_dir / p).resolve())

    return replace(
        settings,
        catalog=fix(settings.catalog),
        asr=replace(settings.asr, whisper_model=fix(settings.asr.whisper_model)),
        model=replace(settings.model, path=fix(settings.model.path)),
        tts=replace(settings.tts, voice=fix(settings.tts.voice)),
        mqtt=replace(settings.mqtt, ca_certs=fix(settings.mqtt.ca_certs),
                     certfile=fix(settings.mqtt.certfile), keyfile=fix(settings.mqtt.keyfile),
                     outbox=fix(settings.mqtt.outbox)),
        llm=replace(settings.llm, memory=fix(settings.llm.memory), light_model=fix(settings.llm.light_model)),
    )


def load(path: str | Path | None) -> Settings:
    """Read and validate a config file; None gives the embedded defaults."""
    if path is None:
        return Settings()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise SettingsError(f"config {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise SettingsError(f"config {path}: not valid YAML{line}") from None
    return parse(data, base_dir=p.resolve().parent)
