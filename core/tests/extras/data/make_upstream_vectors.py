"""Regenerate ``upstream_vectors.json``: the worked fixture's signed artefacts, signed by Node.

Run ``python3 core/tests/extras/data/make_upstream_vectors.py`` (with the core installed, e.g.
``.nox/core/bin/python``) after changing the inputs; the envelopes come from
``upstream_rules.js`` alone, never from our signer.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import upstream  # noqa: E402
import worked  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        fixture = worked.build(Path(folder))
        items = upstream.signed_items(fixture)
        answer = upstream.node(
            {
                "key": fixture.pack_key.read_text(),
                "sign": [{k: v for k, v in i.items() if k != "kind"} for i in items],
            }
        )
    data = {"items": items, "envelopes": answer["signed"]}
    upstream.VECTORS.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {upstream.VECTORS} ({len(items)} signed files)")


if __name__ == "__main__":
    main()
