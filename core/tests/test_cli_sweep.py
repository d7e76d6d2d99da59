"""``sweep`` as a cron job runs it (issue 14.3): the ledger and retention windows from the config,
``--dry-run`` changing nothing, a one-line summary, ``--json`` memory.sweep's answer, clear
errors; and the progress bars, which only a terminal gets."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_custody_state import Ledger, hookimpl
from agent_custody_state.cli import main
from agent_custody_state.cli.progress import progress_bars

OLD = datetime(2020, 1, 1, tzinfo=UTC)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A config folder with a ledger (old and new facts, one held) and a config naming it
    relatively; the working directory is elsewhere, as cron's is."""
    folder = tmp_path / "etc"
    folder.mkdir()
    path = folder / "ledger.jsonl"
    ids: dict[str, str] = {}
    with Ledger(path, clock=lambda: OLD) as old:
        ids["old"] = old.assert_fact(
            subject="s", predicate="p", value="a", space="org", actor="x"
        ).fact_id
        ids["held"] = old.assert_fact(
            subject="s", predicate="q", value="b", space="org", actor="x"
        ).fact_id
        ids["team"] = old.assert_fact(
            subject="s", predicate="r", value="c", space="team:x", actor="x"
        ).fact_id
        old.hold(fact_id=ids["held"], actor="legal", reason="case")
    with Ledger(path) as new:
        ids["new"] = new.assert_fact(
            subject="s", predicate="p2", value="d", space="org", actor="x"
        ).fact_id
    config = folder / "memory.toml"
    config.write_text('ledger = "ledger.jsonl"\nretention = "org=P30D"\n')
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return {"folder": folder, "ledger": path, "config": config, "ids": ids}


def test_cron_sweep_needs_only_the_config(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--config", str(site["config"]), "--reason", "nightly retention"]) == 0
    out, err = capsys.readouterr()
    assert out == "forgot 1 fact; 1 on hold, kept\n" and err == ""
    with Ledger(site["ledger"]) as ledger:
        forgotten = {f.fact_id for f in ledger.facts() if f.forgotten is not None}
    assert forgotten == {site["ids"]["old"]}  # team:x has no window; the new one is young
    assert '"a"' not in site["ledger"].read_text()


def test_json_is_memory_sweeps_answer(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--config", str(site["config"]), "--reason", "r", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["before"] is None and data["retention"] == {"org": "P30D"} and data["space"] is None
    assert [f["factId"] for f in data["forgotten"]] == [site["ids"]["old"]]
    assert data["held"] == [site["ids"]["held"]] and data["stillHeld"] == []
    assert set(data["forgotten"][0]) == {
        "factId",
        "valueDigest",
        "digestKind",
        "removedFrom",
        "verification",
    }


def test_before_and_ledger_flags_win_over_the_config(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "sweep",
        "--config",
        str(site["config"]),
        "--reason",
        "r",
        "--before",
        "2999-01-01T00:00:00Z",
    ]
    assert main([*argv, "--space", "team:x"]) == 0
    assert capsys.readouterr().out == "forgot 1 fact; 0 on hold, kept\n"
    other = site["folder"] / "other.jsonl"
    other.write_text("")
    assert main([*argv, "--ledger", str(other)]) == 0
    assert capsys.readouterr().out == "forgot 0 facts; 0 on hold, kept\n"


def test_dry_run_lists_and_changes_nothing(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(site["folder"])
    assert main(["sweep", "--config", str(site["config"]), "--reason", "r", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(
        f"would forget {site['ids']['old']}  org  learned 2020-01-01T00:00:00.000Z"
    )
    assert out[1] == f"would keep   {site['ids']['held']}  (on legal hold)"
    assert out[2] == "dry run: would forget 1 fact; 1 on hold, kept"
    assert (
        main(["sweep", "--config", str(site["config"]), "--reason", "r", "--dry-run", "--json"])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["dryRun"] is True and data["held"] == [site["ids"]["held"]]
    assert [f["factId"] for f in data["wouldForget"]] == [site["ids"]["old"]]
    assert data["wouldForget"][0]["txTime"] == "2020-01-01T00:00:00.000Z"
    assert _files(site["folder"]) == before  # byte-identical: ledger, lock, config


def test_dry_run_names_the_stores_without_contacting_them(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str], isolated_plugins: Any
) -> None:
    built: list[str] = []

    class Settings(BaseModel):
        label: str

    def factory(settings: Settings, *, name: str) -> Any:
        built.append(name)
        raise AssertionError("a dry run must not build a store")

    class Plugin:
        @hookimpl
        def register_stores(self, register: Callable[..., None]) -> None:
            register("fake", factory, settings=Settings)

    isolated_plugins.register_plugin(Plugin(), name="fake-stores")
    # A ledger of its own: one written with an old clock after the site's newer events would
    # be stamped at their time (transaction time never goes backwards along the append order).
    with Ledger(site["folder"] / "stores.jsonl", clock=lambda: OLD) as ledger:
        held = ledger.assert_fact(
            subject="t", predicate="p", value=1, space="org", actor="x", external={"mine": "m-1"}
        )
    site["config"].write_text(
        'ledger = "stores.jsonl"\nretention = "org=P30D"\n'
        '[[stores]]\nname = "mine"\ntype = "fake"\nlabel = "x"\n'
    )
    assert main(["sweep", "--config", str(site["config"]), "--reason", "r", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would forget {held.fact_id}" in out and "stores: mine" in out
    assert built == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reason", "r"], "no ledger: give --ledger, or --config"),
        (
            ["--reason", "r", "--config", "CONFIG_NO_WINDOWS"],
            "sweep needs --before TIME, or --config",
        ),
        (["--reason", "r", "--config", "missing.toml"], "config file missing.toml does not exist"),
        (
            ["--reason", "r", "--config", "CONFIG", "--before", "2026-01-01"],
            "--before: '2026-01-01' is not an RFC 3339",
        ),
        (
            ["--reason", "r", "--config", "CONFIG", "--forget-key-env", "ACS_UNSET_KEY"],
            "the forget key variable ACS_UNSET_KEY is not set",
        ),
        (
            ["--reason", "r", "--config", "CONFIG", "--ledger", "typo.jsonl"],
            "--ledger typo.jsonl: no such ledger",
        ),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    site: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("ACS_UNSET_KEY", raising=False)
    bare = site["folder"] / "bare.toml"
    bare.write_text('ledger = "ledger.jsonl"\n')
    names = {"CONFIG": str(site["config"]), "CONFIG_NO_WINDOWS": str(bare)}
    before = _files(site["folder"])
    code = main(["sweep", *(names.get(a, a) for a in argv)])
    out, err = capsys.readouterr()
    assert code == (2 if message.startswith("--before") else 1) and out == ""  # a usage error
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1, err
    assert _files(site["folder"]) == before
    assert list(Path.cwd().iterdir()) == []


def test_a_store_still_holding_a_swept_value_is_named_as_memory_sweep_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fact the ledger records in a store this command does not configure: the value is
    erased from the ledger, the exit is 1, and the message is ``memory.sweep``'s own."""
    path = tmp_path / "ledger.jsonl"
    with Ledger(path, clock=lambda: OLD) as old:
        fact_id = old.assert_fact(
            subject="s", predicate="p", value="secret", space="org", actor="x",
            external={"ghost": "g-1"},
        ).fact_id  # fmt: skip
    argv = ["sweep", "--ledger", str(path), "--before", "2021-01-01T00:00:00Z", "--reason", "r"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out.startswith("forgot 1 fact")
    assert err.startswith(
        f"error: swept the ledger, but some values are still held by stores: ghost ({fact_id}): "
    ), err
    assert "secret" not in path.read_text()


def test_no_bars_when_not_a_terminal(
    site: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--ledger", str(site["ledger"]), "--out", "-"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 5
    assert err == f"exported 5 events from {site['ledger']} to standard output\n"


def test_bars_draw_on_a_terminal() -> None:
    screen = io.StringIO()
    with progress_bars(screen, enabled=True) as bars:
        advance = bars.add("exporting", total=4)
        for _ in range(4):
            advance(1)
        report = bars.stages({"ledger": "forgetting"})
        report("ledger", 3, 3)
    drawn = screen.getvalue()
    assert "exporting" in drawn and "4/4" in drawn and "forgetting" in drawn and "3/3" in drawn
    quiet = io.StringIO()
    with progress_bars(quiet) as bars:  # a StringIO is no terminal
        assert not bars.on
        bars.add("exporting", total=4)(4)
    assert quiet.getvalue() == ""
