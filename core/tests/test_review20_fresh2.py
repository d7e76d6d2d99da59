"""Fresh eyes on the twentieth review's ledger and backend changes (part 2): each test fails
without the fix it names."""

from __future__ import annotations

import errno
import fcntl
import gc
import logging
import os
import warnings
from pathlib import Path

import pytest

from agent_custody_state import EventBackendError, Ledger, LedgerError
from agent_custody_state.backends import jsonl
from agent_custody_state.ledger.stopped import stopped_result

LATER = "2100-01-01T00:00:00Z"


def _ledger_of_three(path: Path) -> tuple[Ledger, list[str]]:
    ledger = Ledger(path)
    ids = [
        ledger.assert_fact(subject=f"s{i}", predicate="p", value=i, space="o", actor="x").fact_id
        for i in range(3)
    ]
    return ledger, ids


def _compaction_fails(monkeypatch: pytest.MonkeyPatch, ledger: Ledger) -> None:
    def compact() -> None:
        raise EventBackendError("compaction cut off by the server")

    monkeypatch.setattr(ledger.backend, "compact", compact)


def _stop_after_one(stop: BaseException) -> object:
    def progress(done: int, total: int) -> None:
        if done == 1:
            raise stop

    return progress


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), ValueError("the fact's own error")])
def test_what_stopped_a_sweep_reaches_the_caller_when_its_compaction_fails_too(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    stop: BaseException,
) -> None:
    """Ctrl-C (or a fact's error) in a sweep, then its compaction cut off: the caller got the
    compaction's ``EventBackendError`` instead, so the custody flow (``except Exception``) took a
    Ctrl-C for a fact's error, told the stores and went on, and the command did not exit 130.
    The stop goes on now, carrying what was forgotten, the compaction's failure noted on it
    and logged; the forget is announced and stands."""
    ledger, ids = _ledger_of_three(tmp_path / "l.jsonl")
    with ledger:
        _compaction_fails(monkeypatch, ledger)
        with caplog.at_level(logging.ERROR), pytest.raises(type(stop)) as raised:
            ledger.sweep(before=LATER, actor="x", reason="r", progress=_stop_after_one(stop))
        assert raised.value is stop
        result = stopped_result(stop)
        assert result is not None and [e.fact_id for e in result.forgotten] == ids[:1]
        assert any("compaction cut off" in note for note in getattr(stop, "__notes__", []))
        assert "compacting" in caplog.text
        assert ledger.get(ids[0]).forgotten is not None  # type: ignore[union-attr]
        assert ledger.get(ids[1]).forgotten is None  # type: ignore[union-attr]


def test_a_compaction_failing_alone_is_still_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing else stopped the sweep: the compaction's error is the one raised, as before."""
    ledger, ids = _ledger_of_three(tmp_path / "l.jsonl")
    with ledger:
        _compaction_fails(monkeypatch, ledger)
        with pytest.raises(EventBackendError, match="compaction cut off") as raised:
            ledger.sweep(before=LATER, actor="x", reason="r")
        result = stopped_result(raised.value)
        assert result is not None and sorted(e.fact_id for e in result.forgotten) == sorted(ids)


def test_an_interrupt_during_the_compaction_wins_over_a_facts_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C while a stopped sweep compacts is the user asking out: it is raised."""
    ledger, ids = _ledger_of_three(tmp_path / "l.jsonl")
    with ledger:

        def compact() -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(ledger.backend, "compact", compact)
        stop = ValueError("the fact's own error")
        with pytest.raises(KeyboardInterrupt) as raised:
            ledger.sweep(before=LATER, actor="x", reason="r", progress=_stop_after_one(stop))
        assert raised.value.__context__ is stop
        result = stopped_result(raised.value)
        assert result is not None and [e.fact_id for e in result.forgotten] == ids[:1]


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))


@pytest.mark.parametrize(
    "refusal", [OSError(errno.ENOLCK, "No locks available"), KeyboardInterrupt()]
)
def test_an_open_refused_at_its_lock_keeps_no_descriptor_and_says_nothing_of_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: BaseException
) -> None:
    """A JSONL open whose lock was refused (``flock``: ENOLCK on NFS without locking, Ctrl-C
    while another process's forget holds it) kept the lock file's descriptor while its error
    lived, then warned at collection that a ledger the caller never got "was not closed"."""
    path = tmp_path / "l.jsonl"
    Ledger(path).close()
    real = jsonl.fcntl.flock

    def flock(fd: int, op: int) -> None:
        if op != fcntl.LOCK_UN:
            raise refusal
        real(fd, op)

    monkeypatch.setattr(jsonl.fcntl, "flock", flock)
    before = _open_descriptors()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(type(refusal)) as raised:
            Ledger(path)
        assert _open_descriptors() == before  # the error (its traceback) still alive here
        del raised
        gc.collect()
    assert [w for w in said if issubclass(w.category, ResourceWarning)] == []


def test_a_sweep_takes_certificates_none_as_forget_takes_certificate_none(
    tmp_path: Path,
) -> None:
    """``certificates=None`` meant no certificates, as ``forget(certificate=None)`` still does;
    the up-front check of this session refused it ("must be True, False or ..."), breaking
    callers that spell "none" so. A truthy text is still refused."""
    ledger, ids = _ledger_of_three(tmp_path / "l.jsonl")
    with ledger:
        with pytest.raises(LedgerError, match="certificates must be") as refused:
            ledger.sweep(before=LATER, actor="x", reason="r", certificates="no")  # type: ignore[arg-type]
        assert refused.value.field == "certificates"
        assert all(ledger.get(i).forgotten is None for i in ids)  # type: ignore[union-attr]
        result = ledger.sweep(before=LATER, actor="x", reason="r", certificates=None)  # type: ignore[arg-type]
        assert sorted(e.fact_id for e in result.forgotten) == sorted(ids)
        assert result.certificates == {}
