"""The plugin manager (defensive loading, unique names, routing) and the CLI commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent_custody_state import Ledger, hookimpl
from agent_custody_state.cli import main
from agent_custody_state.plugins import PluginError, PluginManager


def _dist(tmp_path: Path, name: str, module: str, source: str) -> Path:
    """A minimal installed distribution with one entry point, on a private sys.path entry."""
    site = tmp_path / "site"
    (site / f"{name}-1.0.dist-info").mkdir(parents=True, exist_ok=True)
    (site / f"{name}-1.0.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    )
    (site / f"{name}-1.0.dist-info" / "entry_points.txt").write_text(
        f"[agent_custody_state]\n{name} = {module}\n"
    )
    (site / f"{module}.py").write_text(source)
    return site


def _run_plugins(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "plugins"],
        capture_output=True,
        text=True,
        env=env,
    )


def test_broken_plugin_is_reported_not_fatal(tmp_path: Path) -> None:
    site = _dist(tmp_path, "broken-plugin", "broken_mod", "raise RuntimeError('no SDK here')\n")
    out = _run_plugins(site)
    assert out.returncode == 1  # listed, with the others, but the exit status says it failed
    assert "broken-plugin" in out.stdout
    assert "FAILED: import failed: RuntimeError: no SDK here" in out.stdout
    assert "event backend jsonl" in out.stdout
    assert out.stderr.strip() == "error: plugins failed to load: broken-plugin"


def test_duplicate_backend_name_is_an_error(tmp_path: Path) -> None:
    source = (
        "from agent_custody_state import hookimpl\n"
        "@hookimpl\n"
        "def register_event_backends(register):\n"
        "    register('jsonl', 'x:Y')\n"
    )
    site = _dist(tmp_path, "shadow", "shadow_mod", source)
    out = _run_plugins(site)
    assert "event backend 'jsonl' is registered twice (builtins and shadow)" in out.stdout


def test_routing_follows_the_spec(tmp_path: Path) -> None:
    manager = PluginManager(load_entry_points=False)
    assert manager.backend_for(str(tmp_path / "l.jsonl")).name == "jsonl"
    assert manager.backend_for(str(tmp_path / "ledger")).name == "jsonl"
    assert manager.backend_for("memory:").name == "memory"
    with pytest.raises(PluginError, match="install agent-custody-state-events-sqlite"):
        manager.backend_for(str(tmp_path / "L.SQLite"))
    with pytest.raises(PluginError, match=r"agent-custody-state\[postgres\]"):
        manager.backend_for("postgresql://u:secret@h/db")
    with pytest.raises(PluginError, match="no event backend serves s3:// locations"):
        manager.backend_for("s3://bucket/x")


def test_blocked_and_in_process_plugins(tmp_path: Path, isolated_plugins: PluginManager) -> None:
    blocked = PluginManager(load_entry_points=False, blocked={"builtins"})
    assert blocked.plugins["builtins"].error == "blocked" and not blocked.backends
    assert not blocked.listens()  # no event_appended implementation: the ledger skips the call

    seen: list[str] = []

    class Listener:
        @hookimpl
        def event_appended(self, ledger: Ledger, event: object) -> None:
            seen.append(type(event).__name__)

        @hookimpl
        def register_stores(self, register: object) -> None:
            register("dummy", "x:y", description="test")  # type: ignore[operator]

    isolated_plugins.register_plugin(Listener(), name="listener")
    assert isolated_plugins.listens()
    assert isolated_plugins.plugins["listener"].registers == ["store dummy"]
    with Ledger("memory:") as ledger:
        e = ledger.assert_fact(subject="s", predicate="p", value=1, space="o", actor="a")
        ledger.retract(fact_id=e.fact_id, actor="a", reason="r")
    assert seen == ["AssertEvent", "RetractEvent"]


# -- CLI ----------------------------------------------------------------------------------------


def _seed(path: Path) -> list[str]:
    with Ledger(path) as ledger:
        a = ledger.assert_fact(
            subject="s",
            predicate="p",
            value="v1",
            space="org",
            actor="a",
            valid_from="2020-01-01T00:00:00Z",
        )
        b = ledger.assert_fact(
            subject="s", predicate="p", value="v2", space="team:x", actor="a", supersedes=a.fact_id
        )
        return [a.fact_id, b.fact_id]


def test_export_import_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, out, dst = tmp_path / "a.jsonl", tmp_path / "x.jsonl", tmp_path / "b" / "b.jsonl"
    _seed(src)
    (tmp_path / "b").mkdir()  # commands never create folders
    assert main(["export", "--ledger", str(src), "--out", str(out)]) == 0
    assert out.read_bytes() == src.read_bytes()
    assert main(["import", "--ledger", str(dst), "--from", str(out)]) == 0
    assert dst.read_bytes() == src.read_bytes()
    assert main(["import", "--ledger", str(dst), "--from", str(out)]) == 1
    assert "import needs an empty ledger" in capsys.readouterr().err


def test_import_refuses_bad_lines_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _seed(src)
    src.write_text(src.read_text() + '{"kind":"mystery","eventId":"e"}\n')
    assert main(["import", "--ledger", str(dst), "--from", str(src)]) == 1
    assert "a.jsonl:3: unknown event kind 'mystery'" in capsys.readouterr().err
    assert not dst.exists() or dst.read_text() == ""


def test_sweep_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l.jsonl"
    ids = _seed(path)
    assert (
        main(
            [
                "sweep",
                "--ledger",
                str(path),
                "--before",
                "2999-01-01T00:00:00+01:00",
                "--reason",
                "retention",
                "--space",
                "org",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert [f["factId"] for f in result["forgotten"]] == [ids[0]]
    assert result["forgotten"][0]["digestKind"] == "sha256"
    assert '"v1"' not in path.read_text() and '"v2"' in path.read_text()
    assert (
        main(["sweep", "--ledger", str(path), "--before", "2999-01-01T00:00:00", "--reason", "r"])
        == 2  # a flag value of the wrong form is a usage error (SPEC 5)
    )
    assert "error: --before: '2999-01-01T00:00:00' has no UTC offset" in capsys.readouterr().err


def test_usage_errors_exit_2() -> None:
    for argv in (["nonsense"], ["export", "--ledger", "x"], ["sweep", "--bogus"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2


def test_plugins_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent_custody_state", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = {p["name"]: p for p in json.loads(out.stdout)}
    assert set(data["builtins"]["registers"]) >= {"event backend jsonl", "event backend memory"}
    assert SimpleNamespace(**data["builtins"]).error is None
