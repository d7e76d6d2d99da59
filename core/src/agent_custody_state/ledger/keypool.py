"""The key pool of crypto-shred mode: data keys created ahead, in durable blocks.

Writing one key per assert to the key store would double the fsyncs of a durable append. So
keys are created ahead in blocks (the first of ``FIRST_BLOCK`` keys, each next one twice as
large up to ``MAX_BLOCK``; a batch larger than what is left takes what it needs in one block).
A block is written by a thread of its own while the caller encrypts and appends, and the next
one is started ahead, before the keys run out; a caller waits for the blocks its keys come from
before its transaction commits, so a key is on disk before any event it encrypts.
A key is handed out once; keys a crash left unused encrypt nothing, and ``release`` (at close)
destroys the unused ones of a clean stop.

A key id is 32 hex digits: the block's creation time in milliseconds (48 bits, as in a UUIDv7)
and 80 random bits. Ids that grow with time are inserted at the end of the key store's index
(a random id touched a page anywhere in it: four times the key store's work per key, growing
with the store), and a block is written in id order. Uniqueness rests on the random part, as
before; the time says no more than the events' own ``txTime``.

Each key comes with the nonce its one encryption uses, drawn from the system's random source
with it (the nonce is not stored in the key store: the envelope carries it). A key encrypts one
value, so a nonce is never used twice with a key, and an append draws nothing of its own.

Once its block is durable, the block's thread also sets up each key's AES-GCM cipher (the key
schedule) and writes its nonce's base64, so an append finds its key ready to encrypt with: the
setup was the larger part of the cipher's cost on a single append (a key taken before its
cipher is ready is set up by the append itself, which keeps it on the key so the thread does not
set it up again; keys left at ``release`` get none).

A process forked from one holding a pool starts with none of its keys (``forks.watch``):
the parent hands them out, so a child that used them sealed another fact with the parent's key
and nonce (AES-GCM's nonce reused; a forget of one fact destroyed the other's key), and a child
closing its ledger destroyed the keys the parent was still to hand out.
"""

from __future__ import annotations

import binascii
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from agent_custody_state.ledger import forks
from agent_custody_state.ledger.envelope import NONCE_BYTES, cipher_for
from agent_custody_state.ledger.keystore import KEY_BYTES, KeyStore

#: The first block of keys a ledger creates, and the largest (the size doubles per block).
FIRST_BLOCK = 64
MAX_BLOCK = 1024
#: Random bytes in a key id, after its 48-bit creation time in milliseconds (module docstring).
ID_RANDOM_BYTES = 10
#: How many ciphers the block's thread prepares before it lets other threads run.
_PREPARE_STEP = 64


class Key:
    """A data key as ``take`` hands it out: its id, bytes and nonce, and, once the thread that
    wrote its block has prepared them (``cipher``, ``iv``: None until then), the AES-GCM
    cipher set up with it and the nonce's base64 text, ready for the one encryption."""

    __slots__ = ("block", "cipher", "iv", "key", "kid", "nonce")

    def __init__(self, kid: str, key: bytes, nonce: bytes, block: _Refill) -> None:
        self.kid, self.key, self.nonce, self.block = kid, key, nonce, block
        self.cipher: Any = None
        self.iv: str | None = None


def _durable() -> None:
    """What ``take`` returns when every key it handed out is durable already."""


class _Refill:
    """A block of new keys being written to the key store by a thread of its own, which then
    prepares each key's cipher (off the appends' path)."""

    def __init__(self, keys: KeyStore, made: list[Key]) -> None:
        self.made = made
        self.done = False  # written and durable
        self.released = False  # the pool is closing: no more ciphers to prepare
        self.error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(keys,), name="acs-key-refill", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _run(self, keys: KeyStore) -> None:
        made, self.made = self.made, []  # no cycle: a key refers to its block
        try:
            keys.put({k.kid: k.key for k in made})
        except BaseException as exc:  # handed to whoever waits
            self.error = exc
            return
        self.done = True
        # From the end, where ``take`` hands keys out, so the next single append finds its key
        # ready (a batch sealing this block from its start meets this loop in the middle);
        # none an append set up itself (``ShreddingBackend.append`` keeps it on the key), and
        # none once the pool is released: those keys are destroyed unused.
        for i, k in enumerate(reversed(made)):
            if self.released:
                break
            if k.cipher is None:
                k.iv = binascii.b2a_base64(k.nonce, newline=False).decode("ascii")
                k.cipher = cipher_for(k.key)
            if i % _PREPARE_STEP == _PREPARE_STEP - 1:
                time.sleep(0)  # let an append in

    def wait(self) -> None:
        self._thread.join()
        if self.error is not None:
            raise self.error


class KeyPool:
    """Keys created ahead in durable blocks, handed out once each (see the module docstring);
    ``take`` returns keys with the function that waits until all handed out so far are durable.
    """

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys
        self._block = FIRST_BLOCK
        self._after_fork()
        forks.watch(self)

    def _after_fork(self) -> None:
        """No key yet (a new pool, or a forked process: its parent's keys are the parent's)."""
        self._free: list[Key] = []
        self._refills: list[_Refill] = []
        self._lock = threading.Lock()  # a fork may copy it held by a thread that is not there

    def take(self, n: int) -> tuple[list[Key], Callable[[], None]]:
        """``n`` keys, and the function that returns once they are durable (it raises what
        writing them raised; such keys are never handed out again).

        The next block is started ahead, as soon as fewer keys are left than this take or half
        a block: it is written while the caller encrypts, appends and syncs, so the next take
        usually finds its keys on disk already. A take waits only for the blocks its own keys
        come from."""
        with self._lock:
            if any(r.error is not None for r in self._refills):
                self._drop_failed()
            free = self._free
            if len(free) < n:
                self._refill(max(n - len(free), self._block))
            taken = free[-n:]
            del free[-n:]
            if len(free) < max(n, self._block // 2):
                self._refill(max(n, self._block))
        if n == 1:  # the single append's path: one block to look at
            block = taken[0].block
            return taken, _durable if block.done else (lambda: self._settle([block]))
        pending = list({id(k.block): k.block for k in taken if not k.block.done}.values())
        if not pending:  # the usual case: every key taken is on disk already
            return taken, _durable
        return taken, lambda: self._settle(pending)

    def _refill(self, want: int) -> None:
        """Start writing ``want`` new keys; they are handed out after those already free."""
        self._refills = [r for r in self._refills if not r.done]  # settled by its thread
        # One draw from the OS for the whole block: the random part of each id, 32 bytes of
        # key and 12 of nonce.
        step = ID_RANDOM_BYTES + KEY_BYTES + NONCE_BYTES
        blob = os.urandom(want * step)
        stamp = f"{time.time_ns() // 1_000_000 & 0xFFFFFFFFFFFF:012x}"
        made: list[Key] = []
        refill = _Refill(self.keys, made)
        for i in range(0, len(blob), step):
            kid = stamp + blob[i : i + ID_RANDOM_BYTES].hex()
            key = blob[i + ID_RANDOM_BYTES : i + ID_RANDOM_BYTES + KEY_BYTES]
            made.append(Key(kid, key, blob[i + ID_RANDOM_BYTES + KEY_BYTES : i + step], refill))
        made.sort(key=lambda k: k.kid)
        self._refills.append(refill)
        self._free[:0] = made  # handed out from the end
        self._block = min(self._block * 2, MAX_BLOCK)
        refill.start()

    def _drop_failed(self) -> None:
        """Forget the keys of blocks written ahead that failed (a full disk, say) before anyone
        took them: handed out, each failed the write that took it, also after the cause was
        gone (the first write after space came back). Called with the lock held."""
        failed = {id(r) for r in self._refills if r.error is not None}
        self._free = [k for k in self._free if id(k.block) not in failed]
        self._refills = [r for r in self._refills if id(r) not in failed]

    def _settle(self, pending: list[_Refill]) -> None:
        for refill in pending:
            try:
                refill.wait()
            except BaseException:
                with self._lock:
                    self._free = [k for k in self._free if k.block is not refill]
                    if refill in self._refills:
                        self._refills.remove(refill)
                raise
            with self._lock:
                if refill in self._refills:
                    self._refills.remove(refill)

    def release(self) -> None:
        """Destroy the keys never handed out (at close): a key store keeps only used keys.
        Their blocks' threads are told first to set up no more ciphers for them."""
        for refill in list(self._refills):
            refill.released = True
        with suppress(BaseException):
            self._settle(list(self._refills))
        with self._lock:
            unused, self._free = [k.kid for k in self._free], []
        if unused:
            self.keys.destroy(unused)
