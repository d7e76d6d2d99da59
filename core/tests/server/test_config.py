"""The config file (TOML), ``AGENT_CUSTODY_*`` variables and flags, in rising priority."""

from __future__ import annotations

from pathlib import Path

import pytest
from servertest import run_cli

from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.plugins import PluginManager
from agent_custody_state.storebuild import build_stores

FULL = """
ledger = "ledger.sqlite"
forget_key_env = "FORGET_KEY"
retention = "org=P365D,team:*=P90D"
key = "memory.key"

[server]
transport = "http"
host = "127.0.0.1"
port = 8790
allow_direct = true
max_request_bytes = 1048576
max_concurrency = 16
allowed_hosts = ["memory:8790"]

[[server.tokens]]
env = "MEMORY_TOKEN"
role = "gateway"

[[server.tokens]]
env = "AGENT_TOKEN"
role = "direct"

[verify]
attempts = 5
delay_ms = 50

[[stores]]
name = "notes"
type = "unknown-kind"
api_key_env = "NOTES_KEY"
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("AGENT_CUSTODY_") and name != "AGENT_CUSTODY_BLOCK_PLUGINS":
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "memory.toml"
    path.write_text(text)
    return path


def test_every_key_is_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL))
    assert config.ledger == str(tmp_path / "ledger.sqlite")
    assert config.forget_key_env == "FORGET_KEY"
    assert config.retention == "org=P365D,team:*=P90D"
    assert config.key == str(tmp_path / "memory.key")
    server = config.server
    assert (server.transport, server.host, server.port, server.allow_direct) == (
        "http",
        "127.0.0.1",
        8790,
        True,
    )
    assert (server.max_request_bytes, server.max_concurrency) == (1048576, 16)
    assert server.allowed_hosts == ["memory:8790"]
    assert [(t.env, t.role) for t in server.tokens] == [
        ("MEMORY_TOKEN", "gateway"),
        ("AGENT_TOKEN", "direct"),
    ]
    assert (config.verify.attempts, config.verify.delay_ms) == (5, 50)
    assert config.stores[0].name == "notes" and config.stores[0].settings() == {
        "api_key_env": "NOTES_KEY"
    }


def test_environment_overrides_file_and_flags_override_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, FULL)
    monkeypatch.setenv("AGENT_CUSTODY_LEDGER", "env.jsonl")
    monkeypatch.setenv("AGENT_CUSTODY_SERVER__PORT", "9001")
    monkeypatch.setenv("AGENT_CUSTODY_BLOCK_PLUGINS", "nothing")  # not a config key: ignored
    config = load_config(path)
    assert config.ledger == "env.jsonl" and config.server.port == 9001
    assert config.server.max_concurrency == 16  # the rest of [server] still from the file
    config = load_config(path, ledger="flag.jsonl", server={"port": 9002})
    assert config.ledger == "flag.jsonl" and config.server.port == 9002
    assert config.server.transport == "http"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('ledger = "x"\nretention = "org=P3X"', "retention: invalid retention duration 'P3X'"),
        ("[server]\nport = 70000", "server.port: Input should be less than or equal to 65535"),
        ('[server]\nroll = "x"', "server.roll: Extra inputs are not permitted"),
        ('[[server.tokens]]\nenv = "T"\nrole = "admin"', "server.tokens.0.role: Input should be"),
        ('ledgr = "x"', "ledgr: Extra inputs are not permitted"),
        ("[verify]\nattempts = 0", "verify.attempts: Input should be greater than or equal to 1"),
        ("ledger = ", "not valid TOML"),
    ],
)
def test_invalid_files_are_refused_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert message in str(caught.value)
    assert str(tmp_path / "memory.toml") in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_unknown_store_type_lists_installed_ones(isolated_plugins: PluginManager) -> None:
    from agent_custody_state import hookimpl

    class Plugin:
        @hookimpl
        def register_stores(self, register):  # type: ignore[no-untyped-def]
            register("alpha", lambda s, name: None)
            register("beta", lambda s, name: None)

    isolated_plugins.register_plugin(Plugin(), name="two-stores")
    config = load_config(None, stores=[{"name": "n", "type": "gamma"}])
    with pytest.raises(ConfigError) as caught:
        build_stores(config.stores)
    assert "stores[0] (n): unknown store type 'gamma'; installed: alpha, beta" in str(caught.value)


def test_store_settings_validated_and_secrets_checked(
    monkeypatch: pytest.MonkeyPatch, isolated_plugins: PluginManager
) -> None:
    from pydantic import BaseModel

    from agent_custody_state import hookimpl

    class Settings(BaseModel):
        user_id: str
        api_key_env: str

    from agent_custody_state.stores.inprocess import InProcessStore

    class Kept(InProcessStore):
        def __init__(self, settings: Settings, *, name: str) -> None:
            super().__init__(name)
            self.settings = settings

    class Plugin:
        @hookimpl
        def register_stores(self, register):  # type: ignore[no-untyped-def]
            register("kv", Kept, settings=Settings)

    isolated_plugins.register_plugin(Plugin(), name="kv")
    monkeypatch.delenv("KV_KEY", raising=False)
    config = load_config(
        None, stores=[{"name": "k", "type": "kv", "user_id": "u", "api_key_env": "KV_KEY"}]
    )
    with pytest.raises(
        ConfigError, match="api_key_env names the environment variable KV_KEY, which is not set"
    ):
        build_stores(config.stores)
    monkeypatch.setenv("KV_KEY", "secret")
    [store] = build_stores(config.stores)
    assert store.name == "k" and store.settings.user_id == "u"
    config = load_config(None, stores=[{"name": "k", "type": "kv", "api_key_env": "KV_KEY"}])
    with pytest.raises(ConfigError, match=r"stores\[0\] \(k\): user_id: Field required"):
        build_stores(config.stores)
    config = load_config(None, stores=[{"name": "k", "type": "kv"}, {"name": "k", "type": "kv"}])
    with pytest.raises(ConfigError, match="names must be unique; repeated: k"):
        build_stores(config.stores)


def test_serve_with_config_file_reports_unknown_store_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f'ledger = "{tmp_path / "l.jsonl"}"\n[[stores]]\nname = "m"\ntype = "no-such-store"\n',
    )
    done = run_cli("serve", "--config", str(path))
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: {path}: stores[0] (m): unknown store type 'no-such-store'; installed: "
    )
    assert not (tmp_path / "l.jsonl").exists()


def serve_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from agent_custody_state import cli

    try:
        code = cli.main(["serve", *args])
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_serve_names_an_unset_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_VAR_X", raising=False)
    monkeypatch.delenv("NO_SUCH_TOKEN_Y", raising=False)
    path = write(tmp_path, f'ledger = "{tmp_path / "l.jsonl"}"\nforget_key_env = "NO_SUCH_VAR_X"\n')
    code, err = serve_in_process(capsys, "--config", str(path))
    assert code == 1
    assert err == (
        "error: forget_key_env names the environment variable NO_SUCH_VAR_X, which is not set\n"
    )
    code, err = serve_in_process(
        capsys, "--ledger", str(tmp_path / "l.jsonl"), "--http", "--token-env", "NO_SUCH_TOKEN_Y"
    )
    assert code == 1 and "NO_SUCH_TOKEN_Y, which is not set" in err


def test_serve_refuses_a_short_token_naming_its_variable_and_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONG_TOKEN_Z", "z" * 16)
    monkeypatch.setenv("SHORT_TOKEN_Z", "tiny-secret")
    ledger = tmp_path / "l.jsonl"
    code, err = serve_in_process(
        capsys, "--ledger", str(ledger), "--http", "--port", "0", "--token-env", "LONG_TOKEN_Z",
        "--direct-token-env", "SHORT_TOKEN_Z",
    )  # fmt: skip
    assert code == 1
    assert err == (
        "error: the bearer token in SHORT_TOKEN_Z (server.tokens[1], role direct) is too short: "
        "11 characters, at least 16 are needed; make one with: python3 -c 'import secrets; "
        "print(secrets.token_urlsafe(32))'\n"
    )
    assert "tiny-secret" not in err and list(tmp_path.iterdir()) == []  # refused before opening


def test_serve_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_in_process(capsys, "--port", "eighty")[0] == 2
    assert serve_in_process(capsys, "--no-such-flag")[0] == 2
    code, err = serve_in_process(capsys)
    assert code == 1 and "no ledger" in err and "AGENT_CUSTODY_LEDGER" in err


def test_tokens_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AGENT_CUSTODY_SERVER__TOKENS",
        '[{"env": "MEMORY_TOKEN", "role": "gateway"}, {"env": "A", "role": "direct"}]',
    )
    monkeypatch.setenv("AGENT_CUSTODY_SERVER__ALLOW_DIRECT", "true")
    config = load_config(None)
    assert [(t.env, t.role) for t in config.server.tokens] == [
        ("MEMORY_TOKEN", "gateway"),
        ("A", "direct"),
    ]
    assert config.server.allow_direct is True


def test_retention_as_a_table(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[retention]\norg = "P365D"\n"team:*" = "P90D"\n'))
    assert config.retention == {"org": "P365D", "team:*": "P90D"}


def test_relative_paths_in_the_file_are_relative_to_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "memory.toml"
    path.write_text('ledger = "data/ledger.jsonl"\nkey = "memory.key"\n')
    config = load_config(path)
    assert config.ledger == str(folder / "data/ledger.jsonl")
    assert config.key == str(folder / "memory.key")
    assert load_config(path, ledger="mine.jsonl").ledger == "mine.jsonl"  # a flag: as given
    path.write_text('ledger = "postgres://u@h/db"\n')
    assert load_config(path).ledger == "postgres://u@h/db"
    path.write_text('ledger = "memory:"\n')
    assert load_config(path).ledger == "memory:"
