"""Twenty-first review, second wave: ``cli.main`` gives standard output and error their own
error handler back when it returns.

``escape_unencodable`` set the JSON-escape handler on ``sys.stdout`` and ``sys.stderr`` for
good: a program that called ``main([...])`` (a test, a host embedding the command line) kept
the handler on its own streams after, and its own text the encoding lacked was written as
``\\u00e9`` escapes instead of raising as it asked. While a command runs the handler is set
as before.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agent_custody_state.cli import main
from agent_custody_state.cli.textstreams import JSON_ESCAPE


def _ascii(errors: str = "strict") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors=errors)


def test_the_callers_streams_get_their_handlers_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, err = _ascii(), _ascii("replace")
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    code = main(["verify", "--ledger", str(tmp_path / "café" / "ledger.jsonl")])
    assert code != 0
    err.flush()
    assert b"caf\\u00e9" in err.buffer.getvalue()  # escaped while the command ran
    assert (out.errors, err.errors) == ("strict", "replace")
    with pytest.raises(UnicodeEncodeError):
        print("café", file=out)  # the caller's own strict stream raises as it did before


def test_one_stream_for_both_is_restored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both = _ascii()
    monkeypatch.setattr("sys.stdout", both)
    monkeypatch.setattr("sys.stderr", both)
    main(["verify", "--ledger", str(tmp_path / "café" / "ledger.jsonl")])
    assert both.errors == "strict"


def test_a_stream_already_escaping_keeps_the_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _ascii(JSON_ESCAPE)
    monkeypatch.setattr("sys.stdout", out)
    main(["verify", "--ledger", str(tmp_path / "café" / "ledger.jsonl")])
    assert out.errors == JSON_ESCAPE
