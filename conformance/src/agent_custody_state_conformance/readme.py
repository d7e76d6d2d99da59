"""The ``[[stores]]`` examples in a plugin's README, for tests that build them for real.

A store plugin's README shows its configuration as TOML blocks; a test that feeds exactly those
tables through the core's ``build_stores`` keeps the documentation honest.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any


def readme_store_tables(readme: Path) -> list[dict[str, Any]]:
    """Every ``[[stores]]`` table of every ```` ```toml ```` block in ``readme``, in order."""
    blocks = re.findall(r"```toml\n(.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    return [dict(table) for block in blocks for table in tomllib.loads(block).get("stores", [])]
