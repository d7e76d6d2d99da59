"""``[server] resume_every``: the file, ``AGENT_CUSTODY_SERVER__RESUME_EVERY``, ``--resume-every``,
and the server ``serve`` builds from them (``server/resumer.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state.cli import build_parser
from agent_custody_state.cli.serve import _build_server
from agent_custody_state.cli.serve_setup import load
from agent_custody_state.config import ConfigError, load_config
from agent_custody_state.server.runtime import open_runtime


def serve_args(*args: str) -> object:
    return build_parser().parse_args(["serve", *args])


def test_the_setting_from_the_file_the_environment_and_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_CUSTODY_SERVER__RESUME_EVERY", raising=False)
    ledger = str(tmp_path / "l.jsonl")
    assert load(serve_args("--ledger", ledger)).server.resume_every == 300
    config = tmp_path / "memory.toml"
    config.write_text(f'ledger = "{ledger}"\n[server]\nresume_every = 30\n')
    assert load(serve_args("--config", str(config))).server.resume_every == 30
    monkeypatch.setenv("AGENT_CUSTODY_SERVER__RESUME_EVERY", "60")
    assert load(serve_args("--config", str(config))).server.resume_every == 60
    flag = serve_args("--config", str(config), "--resume-every", "0")
    assert load(flag).server.resume_every == 0  # 0: only at start


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_bad_value_is_refused(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_args("--ledger", str(tmp_path / "l.jsonl"), "--resume-every", value)
    assert exited.value.code == 2 and "--resume-every" in capsys.readouterr().err
    config = tmp_path / "memory.toml"
    config.write_text(f"[server]\nresume_every = {value if value != 'soon' else '-1'}\n")
    with pytest.raises(ConfigError, match="resume_every"):
        load_config(config)


def test_serve_builds_its_server_with_the_setting(tmp_path: Path) -> None:
    args = serve_args("--ledger", str(tmp_path / "l.jsonl"), "--resume-every", "45")
    runtime = open_runtime(load(args))
    try:
        config = runtime.config
        assert _build_server(config, runtime).resume_every == 45
        config.server.transport = "http"
        assert _build_server(config, runtime).memory.resume_every == 45
    finally:
        runtime.close()
