"""Parallel ``verify``: on random mutations its report is exactly the sequential one.

Small chunks (3 to 7 events) put every kind of problem at, before and across chunk boundaries:
forgets whose assert is in an earlier chunk, checkpoints in any chunk, unchained runs, deleted,
swapped, duplicated and truncated events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger
from agent_custody_state.cli import main
from agent_custody_state.keys import load_public_key
from agent_custody_state.ledger import parallel
from agent_custody_state.ledger.checkpoints import Checkpoint, read_checkpoints
from agent_custody_state.ledger.parallel import verify_parallel, worker_pool
from agent_custody_state.ledger.verify import verify_lines
from agent_custody_state.server.signing import generate_key_pair

FACT = {"predicate": "plan", "space": "org", "actor": "agent"}


def _write(ledger: Ledger, rounds: int) -> None:
    """Asserts, batches, retracts, confirms and forgets, a forget often far from its assert."""
    ids: list[str] = []
    for i in range(rounds):
        batch = ledger.assert_many(
            [{**FACT, "subject": f"s{i}-{j}", "value": [i, {"j": j, "x": 1.5}]} for j in range(3)]
        )
        ids += [e.fact_id for e in batch]
        ids.append(ledger.assert_fact(**FACT, subject=f"t{i}", value=f"v{i}").fact_id)
        if i % 3 == 1:
            ledger.retract(fact_id=ids.pop(1), actor="a", reason="wrong")
        if i % 2 == 1:
            ledger.forget(fact_id=ids.pop(0), actor="a", reason="erase")
        if i % 4 == 3:
            ledger.confirm(fact_id=ids.pop(), actor="a")


class Stored(tuple[list[bytes], list[Checkpoint], Any]):
    """A ledger's lines, checkpoints and public key (with a short repr for hypothesis)."""

    def __repr__(self) -> str:
        return f"<{len(self[0])} events, {len(self[1])} checkpoints>"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """About 90 events, checkpoints every 11; its lines, checkpoints and public key."""
    tmp = tmp_path_factory.mktemp("par")
    private, public, _ = generate_key_pair(tmp / "memory.key")
    path = tmp / "l.jsonl"
    with Ledger(path, checkpoint_key=private, checkpoint_every=11) as led:
        _write(led, 16)
        led.checkpoint()
    cps = read_checkpoints(Path(f"{path}.checkpoints").read_text())
    return Stored((path.read_bytes().splitlines(), cps, load_public_key(public)))


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    with worker_pool(2) as executor:
        yield executor


def _mutate(lines: list[bytes], data: st.DataObject) -> list[bytes]:
    n = len(lines)
    if n < 2:
        return lines
    kind = data.draw(st.sampled_from(["byte", "delete", "swap", "dup", "truncate", "json"]))
    index = st.integers(0, n - 1)
    if kind == "byte":
        blob = b"\n".join(lines)
        at = data.draw(st.integers(0, len(blob) - 1))
        new = data.draw(st.integers(0, 255).filter(lambda b: b != blob[at]))
        return (blob[:at] + bytes([new]) + blob[at + 1 :]).splitlines()
    if kind == "delete":
        i = data.draw(index)
        return lines[:i] + lines[i + 1 :]
    if kind == "swap":
        i, j = data.draw(index), data.draw(index)
        out = list(lines)
        out[i], out[j] = out[j], out[i]
        return out
    if kind == "dup":
        i, j = data.draw(index), data.draw(index)
        return [*lines[:j], lines[i], *lines[j:]]
    if kind == "truncate":
        return lines[: data.draw(index)]
    i = data.draw(index)
    try:
        event = json.loads(lines[i])
    except ValueError:  # an earlier mutation broke it
        return lines
    if not isinstance(event, dict):
        return lines
    change = data.draw(st.sampled_from(["chain", "genesis", "forgotten", "digest", "time"]))
    if change == "chain":  # an unchained event (or run of them, with repeats)
        event.pop("chain", None)
    elif change == "genesis" and isinstance(event.get("chain"), dict):
        event["chain"]["genesis"] = {"size": i, "head": "0" * 64}
    elif change == "forgotten" and event.get("kind") == "assert":
        event["fact"].update(value=None, forgotten={"at": "x", "digestKind": "none"})
    elif change == "digest" and event.get("kind") == "forget":
        event["valueDigest"] = "1" * 64
    else:
        event["txTime"] = "2000-01-01T00:00:00.000Z"
    return [*lines[:i], json.dumps(event, separators=(",", ":")).encode(), *lines[i + 1 :]]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_parallel_reports_are_the_sequential_ones(
    ledger: Stored,
    pool: ProcessPoolExecutor,
    data: st.DataObject,
) -> None:
    lines, cps, key = ledger
    for _ in range(data.draw(st.integers(0, 3))):
        lines = _mutate(lines, data)
    chunk = data.draw(st.sampled_from([3, 5, 7]))
    stats: dict[str, int] = {}
    expected = verify_lines(lines, checkpoints=cps, public_key=key)
    found = verify_parallel(
        lines, checkpoints=cps, public_key=key, executor=pool, chunk=chunk, stats=stats
    )
    assert asdict(found) == asdict(expected)
    if len(lines) >= chunk:  # else it ran in this process
        assert stats["merged"] + stats["rerun"] == -(-len(lines) // chunk)


def test_an_intact_ledger_is_merged_from_the_workers(
    ledger: Stored, pool: ProcessPoolExecutor
) -> None:
    lines, cps, key = ledger
    stats: dict[str, int] = {}
    report = verify_parallel(
        lines, checkpoints=cps, public_key=key, executor=pool, chunk=4, stats=stats
    )
    assert report.ok and report.events == len(lines) and report.checkpoints_checked == len(cps)
    assert stats == {"merged": -(-len(lines) // 4), "rerun": 0}
    # A forget in a later chunk than its assert, with the assert's certificate edited: found
    # at the assert, by the merge.
    i = next(i for i, line in enumerate(lines) if b'"forgotten"' in line)
    event = json.loads(lines[i])
    event["fact"]["forgotten"]["valueDigest"] = "0" * 64
    lines = [*lines[:i], json.dumps(event, separators=(",", ":")).encode(), *lines[i + 1 :]]
    report = verify_parallel(lines, checkpoints=cps, executor=pool, chunk=4, stats=stats)
    assert report.first is not None and report.first.seq == i + 1
    assert "forget event" in report.first.reason


def test_the_command_takes_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(parallel, "CHUNK", 6)
    path = tmp_path / "l.jsonl"
    with Ledger(path) as led:
        _write(led, 6)
    outs = []
    for jobs in ("1", "2"):
        assert main(["verify", "--ledger", str(path), "--jobs", jobs, "--json"]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] and outs[0]["events"] > 12
    text = path.read_text().replace('"v4"', '"v5"')
    path.write_text(text)
    for jobs in ("1", "2"):
        assert main(["verify", "--ledger", str(path), "--jobs", jobs, "--json"]) == 1
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[2] == outs[3] and "commitment" in outs[2]["firstBad"]["reason"]
    with pytest.raises(SystemExit):
        main(["verify", "--ledger", str(path), "--jobs", "0"])
    assert "1 or more" in capsys.readouterr().err
