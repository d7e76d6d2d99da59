"""The server's configuration: a TOML file, then ``AGENT_CUSTODY_*`` variables, then flags.

Read through pydantic-settings. Nested keys come from the environment with ``__``
(``AGENT_CUSTODY_SERVER__PORT=9000``). Secrets are never values in the file: the file names
environment variables (``forget_key_env``, ``[[server.tokens]] env``, a store's ``*_env`` keys),
and a variable that is named but not set stops the server at startup, naming it; so does an
``AGENT_CUSTODY_*`` variable spelt almost like a setting (``envnames``). Each ``[[stores]]``
table is validated by the settings model its plugin registered; an unknown ``type`` lists the
installed ones.

    ledger = "ledger.sqlite"
    forget_key_env = "FORGET_KEY"
    retention = "org=P365D,team:*=P90D"
    key = "memory.key"                    # every key: docs/configuration.md
    [server]
    transport = "http"
    [[server.tokens]]
    env = "MEMORY_TOKEN"
    role = "gateway"
    [[stores]]
    name = "mem0"
    type = "mem0"
    api_key_env = "MEM0_API_KEY"
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from agent_custody_state.authconfig import OAuthConfig, TokenConfig, check_spaces
from agent_custody_state.envnames import near_misses
from agent_custody_state.ledger.errors import LedgerError
from agent_custody_state.ledger.retention import RetentionPolicy
from agent_custody_state.maskedrepr import MaskedRepr
from agent_custody_state.settingkeys import is_path_setting, setting_keys

_CONFIG_FILE: ContextVar[Path | None] = ContextVar("agent_custody_config_file", default=None)


ENV_PREFIX = "AGENT_CUSTODY_"


#: The longest ``[server] shutdown_delay``: longer is a mistake of units (milliseconds?), not a
#: plan; an orchestrator needs a few seconds to stop routing to a server (``server/drain.py``).
MAX_SHUTDOWN_DELAY = 300.0


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key or variable at fault."""


class ServerConfig(MaskedRepr, BaseModel):
    """``[server]``: transport, trust, and the limits that keep one client from locking
    everyone else out (docs/security.md)."""

    model_config = ConfigDict(extra="forbid")
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8790, ge=0, le=65535)
    tokens: list[TokenConfig] = Field(default_factory=list)
    oauth: OAuthConfig | None = None
    #: the spaces the stdio peer may use (HTTP callers: their token's); unset: all
    spaces: list[str] | None = None
    _check_spaces = field_validator("spaces")(check_spaces)
    #: HTTP without server-side sessions, for several processes behind a load balancer
    stateless: bool = False
    allow_direct: bool = False
    max_request_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    max_concurrency: int = Field(default=8, ge=1)
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    # The largest value memory.write accepts (both transports).
    max_value_elements: int = Field(default=10_000, ge=1)
    max_value_bytes: int = Field(default=1024 * 1024, ge=1)
    # HTTP only: sessions, connections.
    sessions_per_token: int = Field(default=64, ge=1)
    session_idle_timeout: float = Field(default=300, gt=0)
    header_timeout: float = Field(default=10, gt=0)
    body_timeout: float = Field(default=30, gt=0)
    max_connections: int = Field(default=512, ge=1)
    backlog: int = Field(default=256, ge=1)
    #: seconds a SIGTERM keeps the server serving, ``/readyz`` answering draining (HTTP only)
    shutdown_delay: float = 0.0
    #: seconds between the resumes of owed store work while serving (``server/resumer.py``)
    resume_every: float = Field(default=300, ge=0, allow_inf_nan=False)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"

    @field_validator("shutdown_delay")
    @classmethod
    def _delay_in_bounds(cls, value: float) -> float:
        if not 0 <= value <= MAX_SHUTDOWN_DELAY:  # NaN and infinity too
            raise ValueError(
                f"must be seconds from 0 (stop at once) to {MAX_SHUTDOWN_DELAY:g}, not {value:g} "
                "(how long a SIGTERM keeps the server serving while /readyz answers draining)"
            )
        return value


class VerifyConfig(BaseModel):
    """``[verify]``: how removal from the stores is checked (SPEC 4.3)."""

    model_config = ConfigDict(extra="forbid")
    attempts: int = Field(default=3, ge=1)
    delay_ms: float = Field(default=200, ge=0)


class StoreConfig(MaskedRepr, BaseModel):
    """``[[stores]]``: ``name``, ``type`` and ``mirror``; every other key belongs to the store
    type. ``mirror = false`` keeps the plain append-only behaviour (no removal on supersession,
    no put-back on retraction; see ``agent_custody_state.stores.mirror``)."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    mirror: bool = True
    #: the config file's folder when this table came from the file (paths resolve against it)
    _folder: Path | None = PrivateAttr(default=None)
    _file: Path | None = PrivateAttr(default=None)  # the config file, named by its errors

    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class MemoryConfig(MaskedRepr, BaseSettings):
    """Everything ``agent-custody-memory serve`` can be told."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
    )

    ledger: str | None = None
    forget_key_env: str | None = None
    forget_mode: Literal["plain", "crypto-shred"] = "plain"
    key_store: str | None = None
    retention: str | dict[str, str] | None = None
    key: str | None = None
    #: sign a chain checkpoint with ``key`` every this many events (``docs/proofs.md``)
    checkpoint_every: int | None = Field(default=None, ge=1)
    #: where checkpoints go when not the ledger's own place (``<ledger>.checkpoints``, a table)
    checkpoints: str | None = None
    #: owed store removals kept across a crash (``stores.outbox``); default ``<ledger>.outbox``
    #: beside a file ledger, none for a ledger at a URL unless given
    outbox: str | None = None
    #: a folder where every erasure certificate the server issues is kept (``stores.archive``;
    #: needs ``key``); None: certificates only in the answers that asked for them
    certificates: str | None = None
    server: ServerConfig = Field(default_factory=lambda: ServerConfig())
    verify: VerifyConfig = Field(default_factory=lambda: VerifyConfig())
    stores: list[StoreConfig] = Field(default_factory=list)

    @field_validator("retention", mode="before")  # a message of ours, not one per union member
    @classmethod
    def _retention_parses(cls, value: Any) -> Any:
        try:
            RetentionPolicy.parse(value)
        except LedgerError as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _key_store_needs_shred(self) -> MemoryConfig:
        if self.key_store is not None and self.forget_mode != "crypto-shred":
            raise ValueError('key_store is used only with forget_mode = "crypto-shred"')
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Highest first: flags (init), then the environment, then the file.
        sources = [init_settings, env_settings]
        path = _CONFIG_FILE.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


@contextmanager
def _file(path: Path | None) -> Iterator[None]:
    token = _CONFIG_FILE.set(path)
    try:
        yield
    finally:
        _CONFIG_FILE.reset(token)


def _env_name(loc: tuple[Any, ...]) -> str | None:
    """The environment variable that set this setting, if one did."""
    for depth in range(len(loc), 0, -1):
        name = ENV_PREFIX + "__".join(str(p) for p in loc[:depth]).upper()
        if name in os.environ:
            return name
    return None


def _describe(error: ValidationError, model: Any = None) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "config"
        env = _env_name(tuple(item["loc"]))
        if env is not None:
            where += f" (from {env})"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden" and item["loc"]:
            message += _unknown_key_hint(model or MemoryConfig, tuple(item["loc"]))
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _unknown_key_hint(model: Any, loc: tuple[Any, ...]) -> str:
    """What to write instead of an unknown key: the closest known one, else the known ones."""
    import difflib

    for part in loc[:-1]:  # walk to the table holding the key (list indexes skipped)
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = _model_of(field.annotation) if field is not None else None
        if model is None:
            return ""
    known = sorted(getattr(model, "model_fields", {}))
    if not known:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f" (an unknown key; did you mean {close[0]}?)"
    return f" (an unknown key; the keys here are {', '.join(known)})"


def _model_of(annotation: Any) -> Any:
    """The pydantic model a field holds (through ``list[...]`` and ``... | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    found = (_model_of(arg) for arg in get_args(annotation))
    return next((model for model in found if model is not None), None)


def _describe_settings_error(exc: SettingsError) -> str:
    """pydantic-settings says 'error parsing value for field "server" from source
    "EnvSettingsSource"'; name the variable and what it must hold instead."""
    match = re.search(r'field "(\w+)"', str(exc))
    if match is None:
        return str(exc)
    name = ENV_PREFIX + match.group(1).upper()
    return (
        f"{name}: not valid JSON; a table setting from the environment is JSON (e.g. "
        f"{name}='{{\"port\": 8790}}'), or set one key with {name}__<KEY>=<value>"
    )


def load_config(path: str | os.PathLike[str] | None = None, **overrides: Any) -> MemoryConfig:
    """Read the file (if any), the environment and ``overrides`` (flags), in rising priority."""
    file = Path(path) if path is not None else None
    raw: dict[str, Any] = {}
    if file is not None:
        if file.is_dir():
            raise ConfigError(f"config file {file} is a folder; name the TOML file in it")
        if not file.is_file():
            raise ConfigError(f"config file {file} does not exist")
        try:
            raw = tomllib.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:  # unreadable (permissions, I/O): one line naming the file
            raise ConfigError(f"config file {file}: cannot read it: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:  # Python's own message names no file
            bad = f"byte {exc.start} is {exc.object[exc.start : exc.start + 1]!r}"
            why = f"not UTF-8 text ({bad}); save the file as UTF-8"
            raise ConfigError(f"config file {file}: {why}") from None
    for variable, meant in near_misses(ENV_PREFIX, MemoryConfig.model_fields):  # a typo
        raise ConfigError(f"{variable}: not a setting (did you mean {meant}?)")
    try:
        with _file(file):
            config = MemoryConfig(**overrides)
    except ValidationError as exc:
        where = f"{file}: " if file is not None else ""
        raise ConfigError(f"{where}{_describe(exc)}") from None
    except SettingsError as exc:
        raise ConfigError(_describe_settings_error(exc)) from None
    if file is not None:
        _anchor_paths(config, raw, file)
    return config


def _anchor_paths(config: MemoryConfig, raw: dict[str, Any], source: Path) -> None:
    """A relative ``ledger``, ``key``, ``key_store``, ``checkpoints``, ``outbox`` or
    ``certificates`` in the file is
    relative to the file, so a gateway can spawn the server from any working directory; the same
    value from a flag or the environment stays relative to the working directory."""
    folder = source.parent
    for key in ("ledger", "key", "key_store", "checkpoints", "outbox", "certificates"):
        value = getattr(config, key)
        if value is None or raw.get(key) != value or _is_location_url(value):
            continue
        if not Path(value).is_absolute():
            setattr(config, key, str(folder / value))
    oauth, server = config.server.oauth, raw.get("server")
    raw_oauth = server.get("oauth", {}) if isinstance(server, dict) else {}
    file = oauth.jwks_file if oauth is not None else None
    if oauth and file and raw_oauth.get("jwks_file") == file and not Path(file).is_absolute():
        oauth.jwks_file = str(folder / file)
    tables = raw.get("stores")
    if isinstance(tables, list):
        for index, store in enumerate(config.stores):
            # Only a table exactly as the file wrote it (not one the environment replaced).
            if index < len(tables) and tables[index] == store.model_dump(exclude_unset=True):
                store._folder, store._file = folder, source


def _anchor_settings(raw: dict[str, Any], model: Any, folder: Path | None) -> dict[str, Any]:
    """``raw`` with each relative path setting resolved against the config file's folder,
    under whichever key the table gives it (``setting_keys``)."""
    if folder is None or model is None:
        return raw
    out = dict(raw)
    for name, field in model.model_fields.items():
        if not is_path_setting(field):
            continue
        for key in setting_keys(name, field, model):
            value = out.get(key)
            if not isinstance(value, str) or not value or _is_location_url(value):
                continue
            if not Path(value).is_absolute():
                out[key] = str(folder / value)
    return out


def _is_location_url(value: str) -> bool:
    # postgres://..., memory:, or any other scheme a plugin claims
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", value) is not None


def env_secret(name: str, what: str) -> str:
    """The value of a variable the configuration names; unset or empty is an error naming it."""
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"{what} names the environment variable {name}, which is not set")
    return value
