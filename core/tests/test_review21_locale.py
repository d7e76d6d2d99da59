"""The command line on standard streams that are not UTF-8 (twenty-first review).

``PYTHONIOENCODING=ascii`` (set by a platform), a Latin-1 locale, ``PYTHONCOERCECLOCALE=0`` or
a Windows console give Python standard streams that cannot encode ``café 日本``: every command
that printed such a value stopped with a ``UnicodeEncodeError`` traceback. Now what a stream
cannot encode is written as a ``\\uXXXX`` escape (``cli.textstreams``, set once in ``cli.main``):
``--json`` stays valid JSON that reads back to the same value, a table shows the escape with
its columns aligned, and a file a command writes is UTF-8 whatever the locale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_custody_state import Ledger
from agent_custody_state.canonical import js_json
from agent_custody_state.cli.textstreams import JSON_ESCAPE

CLI = [sys.executable, "-m", "agent_custody_state"]
#: Latin-1 has the é, neither encoding has the rest; the emoji is beyond U+FFFF.
VALUE = "café 日本 😀 back\\slash"
ENCODINGS = ("ascii", "latin-1")


#: An ASCII locale without UTF-8 mode or locale coercion: arguments, paths and streams ASCII.
ASCII_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def run(
    encoding: str, *argv: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The command with standard streams in ``encoding`` (arguments still UTF-8: the C locale
    is coerced, as by default)."""
    done = subprocess.run(
        [*CLI, *map(str, argv)],
        capture_output=True,
        env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": encoding, **(env or {})},
        timeout=60,
    )
    assert b"Traceback" not in done.stderr, done.stderr.decode(encoding, "replace")
    return done


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "u.jsonl"
    with Ledger(path) as ledger:
        fact = ledger.assert_fact(
            subject="user:café", predicate="name", value=VALUE, space="org", actor="agent-é"
        )
    return path, fact.fact_id


def _dry_sweep(path: Path) -> tuple[str | Path, ...]:
    """``sweep --dry-run`` of everything learned before 2099 on the ledger at ``path``."""
    return (
        "sweep",
        "--ledger",
        path,
        "--before",
        "2099-01-01T00:00:00Z",
        "--reason",
        "r",
        "--dry-run",
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_output_is_valid_json_with_the_same_values(
    seeded: tuple[Path, str], encoding: str
) -> None:
    path, fact_id = seeded
    for argv in (
        ("facts", "--ledger", path, "--json"),
        ("history", fact_id, "--ledger", path, "--json"),
        (*_dry_sweep(path), "--json"),
    ):
        done = run(encoding, *argv)
        assert done.returncode == 0, done.stderr
        # The bytes are in the stream's encoding; what it lacks is escaped, as JSON allows.
        assert "user:café" in json.dumps(
            json.loads(done.stdout.decode(encoding)), ensure_ascii=False
        ), argv
    shown = json.loads(
        run(encoding, "show", fact_id, "--ledger", path, "--json").stdout.decode(encoding)
    )
    assert shown["value"] == VALUE and shown["actor"] == "agent-é"


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_tables_and_lines_show_escapes_aligned(seeded: tuple[Path, str], encoding: str) -> None:
    path, fact_id = seeded
    done = run(encoding, "facts", "--ledger", path)
    assert done.returncode == 0
    lines = done.stdout.decode(encoding).splitlines()
    row = next(line for line in lines if fact_id in line)
    assert "\\u65e5\\u672c \\ud83d\\ude00" in row  # escapes, not a traceback
    # Lines drawn in ASCII (escaped box characters would fill the table), laid out with the
    # escapes' width: the header and the row are as long, their column bars in line.
    assert "\\u25" not in done.stdout.decode(encoding), lines
    header = next(line for line in lines if line.startswith("| fact"))
    bars = [[i for i, char in enumerate(line) if char == "|"] for line in (header, row)]
    assert bars[0] == bars[1], lines
    history = run(encoding, "history", fact_id, "--ledger", path)
    assert history.returncode == 0 and fact_id in history.stdout.decode(encoding)
    dry = run(encoding, *_dry_sweep(path))
    assert dry.returncode == 0 and f"would forget {fact_id}" in dry.stdout.decode(encoding)


def test_an_ascii_locale_prints_json_and_says_why_an_argument_is_refused(
    seeded: tuple[Path, str],
) -> None:
    """With no UTF-8 anywhere, Python decodes a non-ASCII argument into lone surrogates: the
    ledger refuses such a value, and the error now says what to change."""
    path, fact_id = seeded
    done = run("ascii", "facts", "--ledger", path, "--json", env=ASCII_LOCALE)
    assert json.loads(done.stdout)["facts"][0]["value"] == VALUE
    before = path.read_bytes()
    argv = ("forget", "--ledger", path, "--fact", fact_id, "--reason", "rétention")
    done = run("ascii", *argv, env=ASCII_LOCALE)
    err = done.stderr.decode("ascii")
    assert done.returncode == 1 and err.count("\n") == 1, err
    assert "lone surrogate" in err and "LC_ALL=C.UTF-8" in err, err
    assert path.read_bytes() == before


def test_an_error_naming_a_non_ascii_path_is_one_escaped_line(tmp_path: Path) -> None:
    missing = tmp_path / "nöpe 日本.jsonl"
    done = run("ascii", "facts", "--ledger", missing)
    assert done.returncode == 1
    err = done.stderr.decode("ascii")
    assert err.count("\n") == 1 and "n\\u00f6pe \\u65e5\\u672c.jsonl" in err, err


def test_files_written_are_utf8_whatever_the_streams(seeded: tuple[Path, str]) -> None:
    path, _ = seeded
    out = path.parent / "exporté.jsonl"
    done = run("ascii", "export", "--ledger", path, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "export\\u00e9.jsonl" in done.stderr.decode("ascii")
    assert out.read_bytes() == path.read_bytes()  # the ledger's own UTF-8 lines
    assert VALUE.encode() in out.read_bytes().replace(b"\\\\", b"\\")


def test_the_escape_reads_back_as_the_same_json() -> None:
    """In process: each character an encoding lacks is a JSON escape (a surrogate pair beyond
    U+FFFF, a lone surrogate as itself), so wire JSON written through it parses back equal."""
    data = {"v": [VALUE, "\udcff", "\\é", "a\u2028b"], "k é": 1}
    for encoding in (*ENCODINGS, "utf-8"):
        raw = js_json(data).encode(encoding, JSON_ESCAPE)
        assert json.loads(raw.decode(encoding)) == data
    assert "😀".encode("ascii", JSON_ESCAPE) == b"\\ud83d\\ude00"
