"""``sweep --at``: the sweep after a dry run forgets exactly what the dry run listed, though
facts crossed a retention window in between (windows are measured from the dry run's
``measuredAt``, never after now)."""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

from agent_custody_state import Ledger
from agent_custody_state.cli import main

FACT = {"predicate": "p", "space": "team", "actor": "a"}


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_a_sweep_at_the_dry_runs_instant_forgets_what_it_listed(tmp_path: Path) -> None:
    ledger, config = tmp_path / "l.jsonl", tmp_path / "memory.toml"
    config.write_text(f'ledger = "{ledger}"\nretention = "team=PT0.5S"\n')
    with Ledger(ledger) as book:
        old = book.assert_fact(subject="old", value=1, **FACT).fact.fact_id
        time.sleep(0.6)  # past the window
        young = book.assert_fact(subject="young", value=2, **FACT).fact.fact_id
    base = ["sweep", "--config", str(config), "--reason", "retention"]
    code, out, err = cli(*base, "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert [f["factId"] for f in plan["wouldForget"]] == [old]
    time.sleep(0.6)  # the young fact crosses its window too
    code, out, err = cli(*base, "--json", "--at", plan["measuredAt"])
    assert code == 0, err
    assert [f["factId"] for f in json.loads(out)["forgotten"]] == [old]  # not the young one
    with Ledger(ledger) as book:
        assert [f.fact_id for f in book.as_of()] == [young]
    code, _, err = cli(*base, "--at", "2999-01-01T00:00:00Z")
    assert code == 1 and "after now" in err, err
    code, _, err = cli(*base, "--at", plan["measuredAt"], "--before", plan["measuredAt"])
    assert code == 1 and "does not go with --before" in err, err
