"""The crypto-shred envelope spliced into a plain line (``envelope.spliced_line``): the bytes
the reference encoder writes for the sealed event, for any value and any text before it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_custody_state import Ledger
from agent_custody_state.backends.memory import MemoryBackend
from agent_custody_state.canonical import js_json
from agent_custody_state.ledger.envelope import spliced_line
from agent_custody_state.ledger.shred import ShreddingBackend

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(
    ['"value":', 'x"value":1', "\\", '"', "\u2028", "é"]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


_KEY = _TEXT.filter(lambda t: bool(t) and "\x00" not in t)  # the ledger refuses U+0000 in keys


@given(value=_JSON, subject=_KEY, predicate=_KEY)
@settings(max_examples=150, deadline=None)
def test_the_spliced_line_is_the_reference_line(
    value: object, subject: str, predicate: str
) -> None:
    """The envelope spliced into the plain line in the value's place (``spliced_line``) gives
    the reference encoder's line of the sealed event, whatever the value and the texts before
    it hold (``"value":`` included)."""
    with Ledger(MemoryBackend(), forget_mode="crypto-shred") as ledger:
        backend = ledger.backend
        assert isinstance(backend, ShreddingBackend)
        lines: list[str | None] = []
        real_append = backend.inner.append

        def kept(events: object) -> None:
            lines.extend(e.line for e in events)  # type: ignore[attr-defined]
            real_append(events)  # type: ignore[arg-type]

        backend.inner.append = kept  # type: ignore[method-assign]
        ledger.assert_fact(subject=subject, predicate=predicate, value=value, space="o", actor="a")
        stored = backend.inner.last_event()
        assert stored is not None
        if lines[-1] is not None:  # None: a value plainseal leaves to the backend's encoder
            assert lines[-1] == js_json(stored.to_dict())
        assert ledger.as_of(subject=subject)[0].value == value


def test_a_line_without_the_value_in_its_place_is_encoded_instead() -> None:
    box = {"shred": "A256GCM", "kid": "0a1b", "iv": "aXY=", "ct": "Y3Q="}
    assert spliced_line('{"fact":{"value":2,"x":1}}', b"3", box) is None  # not the value's text
    assert spliced_line('{"fact":{"value":23}}', b"2", box) is None  # a prefix of it only
    assert spliced_line('{"fact":{"x":2}}', b"2", box) is None  # no value key
    assert spliced_line('{"fact":{"value":2}}', b"2", {**box, "kid": 'a"b'}) is None
    assert spliced_line('{"fact":{"value":2}}', b"2", box) == (
        '{"fact":{"value":{"shred":"A256GCM","kid":"0a1b","iv":"aXY=","ct":"Y3Q="}}}'
    )
