"""The core's inspection commands on a PostgreSQL ledger (the embedded server): the memory
tools' JSON, and not a row written."""

from __future__ import annotations

import json
from urllib.parse import unquote, urlsplit

import psycopg
import pytest

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.ledger.chain import public_event, public_fact

pytestmark = pytest.mark.postgres


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _rows(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as db:
        return db.execute("SELECT seq, json FROM inspected ORDER BY seq").fetchall()


def test_inspect_commands_on_postgres(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    location = f"{postgres_url}&table=inspected"
    with Ledger(location) as ledger:
        old = ledger.assert_fact(
            subject="user:1", predicate="plan", value="pro", space="org", actor="a",
            valid_from="2025-01-01T00:00:00Z",
        )  # fmt: skip
        new = ledger.assert_fact(
            subject="user:1", predicate="plan", value="team", space="org", actor="a",
            supersedes=old.fact_id, valid_from="2025-06-01T00:00:00Z",
        )  # fmt: skip
        ledger.retract(fact_id=new.fact_id, actor="ops", reason="wrong")
        expected = [public_fact(f.to_dict()) for f in ledger.as_of()]
        history = [public_event(e) for e in ledger.history(new.fact_id)]
    before = _rows(postgres_url)
    loc = ("--ledger", location)
    assert _json(capsys, "facts", *loc, "--json") == {"facts": expected}
    assert [f["factId"] for f in expected] == [old.fact_id]
    assert _json(capsys, "history", new.fact_id, *loc, "--json") == {"events": history}
    timeline = _json(capsys, "timeline", "user:1", *loc, "--json")
    assert timeline["states"] == {old.fact_id: "current", new.fact_id: "retracted"}  # type: ignore[index]
    assert _json(capsys, "show", new.fact_id, *loc, "--json")["retracted"] is True  # type: ignore[index]
    assert main(["facts", *loc]) == 0 and old.fact_id in capsys.readouterr().out
    # A refusal names the ledger with its password masked.
    password = unquote(urlsplit(postgres_url).password or "")
    assert password
    assert main(["history", "no-such-fact", *loc]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unknown fact no-such-fact in postgresql://") and "***" in err
    assert password not in err
    assert main(["timeline", "user:nobody", *loc]) == 0
    assert password not in capsys.readouterr().err
    assert main(["verify", *loc]) == 0  # its "ok:" line names the ledger, masked
    out, err = capsys.readouterr()
    assert out.startswith("ok: postgresql://") and "***" in out, out
    assert password not in out + err
    assert _rows(postgres_url) == before
