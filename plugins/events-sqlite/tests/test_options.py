"""The SQLite backend's options: a misspelt one is refused before the file is created
(``agent_custody_state.backendoptions``), the ones it takes are honoured."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_custody_state import Ledger


def test_a_misspelt_option_is_refused_and_no_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(TypeError) as raised:
        Ledger(path, buzy_timeout=5)
    assert str(raised.value) == (
        "the sqlite backend takes no option 'buzy_timeout' (did you mean 'busy_timeout'?); "
        "its options: busy_timeout, cache_kib, read_only"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_options_it_takes_are_honoured(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, busy_timeout=0.25, cache_kib=1024) as ledger:
        assert ledger.backend._busy_s == 0.25
        ledger.assert_fact(space="s", actor="a", subject="acct:42", predicate="plan", value="pro")
    with Ledger(path, read_only=True) as reader:
        assert reader.read_only and reader.count() == 1
