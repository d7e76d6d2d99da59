"""Regenerate ``js_canonical_vectors.json`` by running ``js_canonical.js`` under Node.js.

Run ``python3 core/tests/data/make_js_vectors.py`` after changing ``INPUTS``; the expected bytes
come from Node alone, never from our encoder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

INPUTS: list[Any] = [
    1.0,
    1e21,
    1e20,
    0.1,
    1e-7,
    1.5e-6,
    1.23e-18,
    -0.0,
    5e-324,
    1.7976931348623157e308,
    1e-06,
    123456789012345678,
    "enterprise",
    '\u2028\u007f\u0000\u001f"\\\\/\b\f\n\r\t',
    "\ud800x",
    "\ud83d\ude00",
    {"b": 1, "a": 2, "é": 3, "\U0001f600": 4, "\uffff": 5, "A": [1, {"z": None, "y": True}]},
    [1.25, -3.5e-10, 9007199254740993, False],
    {"": {"": []}},
    100,
    -1e-06,
    1e-06,
    4.35,
    0.30000000000000004,
    # Array-index keys: JavaScript lists them first, in numeric order (SPEC 2.5).
    {"b": 1, "a": 4, "10": 2, "9": 3},
    {
        "x": 0,
        "4294967295": 1,
        "4294967294": 2,
        "01": 3,
        "-1": 4,
        "1.5": 5,
        "1e3": 6,
        "0": 7,
        "9": 8,
        "10": 9,
        " 1": 10,
        "1 ": 11,
        "+1": 12,
        "\u0661": 13,
        "00": 14,
        "": 15,
    },
    {"z": {"2": [{"11": True, "b": None, "1": "one"}], "a": 1}, "10": {"01": 0, "1": 1}},
    [{"3": "c", "20": "t", "100": "h"}, {"": 0, "0": ""}, {"a": {"1": {"0": [{"5": 5, "4": 4}]}}}],
    {"4294967294": "max", "4294967293": "below", "42949672940": "long", "99999999999": "11"},
    {"\uffff": 3, "7": 7, "\U0001f600": 2, "é": 1, "70": 70, "8": 8},
]


def main() -> int:
    payload = json.dumps(INPUTS, ensure_ascii=True)  # \\u escapes carry lone surrogates safely
    out = subprocess.run(
        ["node", str(HERE / "js_canonical.js")],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
    )
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    cases = [
        {"input": value, **result}
        for value, result in zip(INPUTS, json.loads(out.stdout), strict=True)
    ]
    document = {
        "generated_by": f"Node.js {version.stdout.strip()} running js_canonical.js: JSON.stringify"
        " of a copy rebuilt with keys sorted by Array.prototype.sort (UTF-16 code"
        " units); sha256 and HMAC-SHA256 (key k3y) of the UTF-8 bytes; stringify ="
        " JSON.stringify of the parsed input",
        "cases": cases,
    }
    (HERE / "js_canonical_vectors.json").write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
