"""Twentieth review, fresh eyes (part 1): the masking of values and secrets in failures and logs.

- ``withheld`` masked one form after another, each in the text the previous ones had masked: a
  value holding words of the mask (``value``, ``with``, ``held``) matched inside the masks, which
  nested (``[v[valu[value ...``) and doubled with each such word.
- ``withholding`` was left when a cancelled caller stopped waiting, while the worker thread
  of the blocking call (``kit.run_sync``) ran on and logged the text it sent, unmasked.
- A guarded logger's filter raised into the code that logged when a record's arguments did not
  fit its message (an unguarded logger reports "Logging error" and carries on).
- ``MaskedRepr`` showed a quoted ``password='...'`` parameter (libpq's, for a password with a
  space) as it was.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading

import pytest

from agent_custody_state.config import load_config
from agent_custody_state.stores.base import guard_logger
from agent_custody_state.stores.kit import run_sync
from agent_custody_state.stores.withheld import MASK, withheld, withholding, without_sending

SECRET = "diagnosis HIV positive, SSN 123-45-6789"
#: Strings of four characters or more that the mask itself contains.
MASK_WORDS = sorted(
    {MASK[i:j] for i in range(len(MASK)) for j in range(i + 4, len(MASK) + 1)},
    key=lambda word: (len(word), word),
)


# -- withheld: one pass ---------------------------------------------------------------------------


def test_a_value_holding_words_of_the_mask_is_masked_once_each() -> None:
    tags = MASK_WORDS[:20]  # "valu", "alue", "with", "held", ...: a value's tags
    text = withheld("the vendor refused the labels " + " ".join(tags), tags)
    assert re.fullmatch(r"the vendor refused the labels (\[value withheld\] ?)+", text), text


def test_masking_never_grows_a_text_past_its_quotes() -> None:
    """Each pass used to double the masks: 24 such words made a text of 1.9 million
    characters (cut to the limit only at the end), 34 of 45 million, all of them exhausted the
    memory."""
    text = withheld("refused: " + " ".join(MASK_WORDS[:24]), MASK_WORDS[:24])
    assert "more characters" not in text
    assert len(text) < 24 * len(MASK) + 20


def test_forms_overlapping_in_the_text_are_masked_as_one() -> None:
    text = withheld("got 'alpha-beta-gamma' back", ["alpha-beta", "beta-gamma"])
    assert text == f"got '{MASK}' back"


# -- withholding: a cancelled caller's worker thread ----------------------------------------------


def test_a_cancelled_sends_worker_thread_logs_the_value_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = "review20.fresh1.sdk"
    guard_logger(name)
    sdk = logging.getLogger(name)
    release, logged = threading.Event(), threading.Event()

    def send() -> None:  # a blocking SDK call: it logs what it sends after a while
        release.wait(10)
        sdk.info(f"Creating memory with data={SECRET!r}")
        logged.set()

    async def put() -> None:
        with withholding(SECRET):
            await run_sync(send)

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(put(), 0.05)  # the caller gives up; the thread runs on
        release.set()
        assert await asyncio.to_thread(logged.wait, 10)

    with caplog.at_level(logging.INFO, logger=name):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records if r.name == name] == [
        f"Creating memory with data='{MASK}'"
    ]
    assert without_sending(SECRET) == SECRET  # released once the thread's call returned


# -- the guarded loggers' filter ------------------------------------------------------------------


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError(f"cannot print {SECRET}")


def test_a_guarded_logger_never_raises_into_the_code_that_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = "review20.fresh1.faulty"
    guard_logger(name)
    sdk = logging.getLogger(name)
    with caplog.at_level(logging.INFO, logger=name):
        sdk.info("sent %s to %s", SECRET)  # raised TypeError at the call
        sdk.info("sent %s", _Unprintable())  # raised RuntimeError at the call
        sdk.info(f"sending {SECRET}: %s %s", "one")
    messages = [r.getMessage() for r in caplog.records if r.name == name]
    assert messages == [
        "sent %s to %s (its arguments are not shown: TypeError)",
        "sent %s (its arguments are not shown: RuntimeError)",
        f"sending {SECRET}: %s %s (its arguments are not shown: TypeError)",
    ]
    with caplog.at_level(logging.INFO, logger=name), withholding(SECRET):
        sdk.info(f"sending {SECRET}: %s %s", "one")  # the text kept is masked like any
    assert caplog.records[-1].getMessage() == f"sending {MASK}: %s %s " + (
        "(its arguments are not shown: TypeError)"
    )


# -- MaskedRepr: a quoted password= parameter -----------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "host=db password='pw 7Qx2 Lm9Rk' sslmode=require",
        'host=db password="pw 7Qx2 Lm9Rk" sslmode=require',
        "host=db password='pw 7Qx2 Lm9Rk' options=\"-c x\"",  # repr escapes the ' quotes
        "host=db password=pw\\7Qx2\\Lm9Rk sslmode=require",
    ],
)
def test_the_configurations_repr_masks_a_quoted_password(dsn: str) -> None:
    store = {"name": "m", "type": "mem0", "local_config": {"vector_store": {"dsn": dsn}}}
    config = load_config(stores=[store])
    for text in (repr(config), str(config.stores[0])):
        assert "7Qx2" not in text and "Lm9Rk" not in text, text
        assert "sslmode=require" in text or 'options=\\"-c x\\"' in text or "-c x" in text
    assert config.stores[0].settings()["local_config"]["vector_store"]["dsn"] == dsn
