"""Chained block hashes (§8.2): the name a prefix cache gives a full block, which is the same
exactly when everything from the start of the sequence up to the end of that block is the same.

A token's K and V depend on every token before it (attention sees the whole prefix), so two blocks
with the same tokens after different prefixes hold different KV and must not be confused. A prefix
cache therefore names full block ``i`` by a hash of its parent's name and its own tokens,

    ``h_i = H(h_{i-1} ‖ tokens of block i)``, with ``h_0`` = :data:`ROOT_HASH`,

so ``h_i`` is a function of the whole prefix ``tokens[: i * block_size]`` (Mooncake Fig. 3; vLLM's
automatic prefix caching, which came after the 2023 paper: v1's ``hash_block_tokens`` chains a
block's tokens onto its parent's hash the same way). Only full blocks are named: the partial block
at the end of a sequence gets no hash and is never cached.

``H`` is SHA-256 over a canonical encoding, so a hash is the same in every run, process and machine
(Python's own ``hash()`` is salted per process and must not be used for this):

* the domain-separation prefix ``b"kvcourse.block_hash.v1\\x00"``;
* the parent's 32-byte digest;
* the number of tokens in the block, as an unsigned 64-bit little-endian integer;
* each token as an unsigned 64-bit little-endian integer (0 ≤ token < 2**64).

Every field has a fixed width or a stated length, so two different (parent, tokens) pairs never
encode to the same bytes; a collision would need a SHA-256 collision.

Exercise 10, with block size 4 and a 20-token request (5 full blocks): changing one token in
block 3 changes the hashes of blocks 3, 4 and 5 and leaves blocks 1 and 2 alone.

>>> tokens = list(range(100, 120))
>>> edited = tokens.copy()
>>> edited[9] = 7  # token 9 lies in block 3 (tokens 8..11)
>>> a = chained_block_hashes(tokens, 4)
>>> b = chained_block_hashes(edited, 4)
>>> len(a), [x == y for x, y in zip(a, b)]
(5, [True, True, False, False, False])

Two requests share hashes exactly as long as they share a prefix of full blocks, and a partial
last block gets none:

>>> c = chained_block_hashes(tokens[:10] + [0, 0, 0], 4)  # 13 tokens: 3 full blocks + 1 token
>>> len(c), [x == y for x, y in zip(a, c)]
(3, [True, True, False])
>>> short_hash(ROOT_HASH)
'bc54a308'
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence

from kvcourse._checks import as_index, check_positive_int

__all__ = [
    "DIGEST_SIZE",
    "HASH_DOMAIN",
    "MAX_TOKEN",
    "ROOT_HASH",
    "block_hash",
    "chained_block_hashes",
    "short_hash",
]

#: The bytes every encoded link starts with, so these digests can never be mistaken for SHA-256
#: of some other format (and a later encoding can change ``v1``).
HASH_DOMAIN = b"kvcourse.block_hash.v1\x00"

#: Length of a block hash in bytes (SHA-256).
DIGEST_SIZE = 32

#: The largest token id the encoding holds (unsigned 64-bit).
MAX_TOKEN = 2**64 - 1

#: ``h_0``, the parent of a sequence's first block: SHA-256 of ``HASH_DOMAIN + b"root"``.
ROOT_HASH: bytes = hashlib.sha256(HASH_DOMAIN + b"root").digest()

_COUNT = struct.Struct("<Q")


def block_hash(parent: bytes, tokens: Sequence[int]) -> bytes:
    """One link of the chain: the 32-byte name of a block holding ``tokens`` after the prefix
    named ``parent`` (:data:`ROOT_HASH` for a sequence's first block).

    ``tokens`` are the block's token ids (one or more ints, 0 ≤ id < 2**64; NumPy integers are
    fine, bools and floats are refused). The block size is not an argument: the number of tokens
    is part of what is hashed.
    """
    parent = _check_parent(parent, "parent")
    ids = _check_tokens(tokens)
    if not ids:
        raise ValueError("a block holds at least one token; pass the block's token ids")
    return _link(parent, ids)


def chained_block_hashes(
    tokens: Sequence[int], block_size: int, *, root: bytes = ROOT_HASH
) -> list[bytes]:
    """The hash of every *full* block of a token sequence, in order: ``len(tokens) // block_size``
    digests, block ``i``'s chained onto block ``i - 1``'s (the first onto ``root``).

    The tokens after the last full block (a partial block) get no hash: they are still being
    filled, and a prefix cache only shares full blocks. Every token is checked, the partial block's
    too, so an error does not depend on where the blocks end.
    """
    block_size = check_positive_int("block_size", block_size, "e.g. 16 (vLLM's default)")
    root = _check_parent(root, "root")
    ids = _check_tokens(tokens)
    hashes = []
    parent = root
    for start in range(0, len(ids) - block_size + 1, block_size):
        parent = _link(parent, ids[start : start + block_size])
        hashes.append(parent)
    return hashes


def short_hash(h: bytes, n: int = 8) -> str:
    """The first ``n`` hex digits of a block hash, for tables and drawings in the book
    (8 digits tell apart the few dozen blocks of a demo; the full digest has 64)."""
    if not isinstance(h, (bytes, bytearray)):
        raise TypeError(f"h must be a block hash (bytes), got {h!r} ({type(h).__name__})")
    n = check_positive_int("n", n, "e.g. 8")
    if n > 2 * len(h):
        raise ValueError(f"n must be at most {2 * len(h)} (the digest's hex length), got {n}")
    return bytes(h).hex()[:n]


def _link(parent: bytes, ids: list[int]) -> bytes:
    """SHA-256 of the canonical encoding of one (checked) link."""
    digest = hashlib.sha256(HASH_DOMAIN)
    digest.update(parent)
    digest.update(_COUNT.pack(len(ids)))
    digest.update(struct.pack(f"<{len(ids)}Q", *ids))
    return digest.digest()


def _check_parent(parent: object, name: str) -> bytes:
    if not isinstance(parent, bytes):
        raise TypeError(
            f"{name} must be a block hash (32 bytes, e.g. ROOT_HASH or an earlier block_hash()), "
            f"got {parent!r} ({type(parent).__name__})"
        )
    if len(parent) != DIGEST_SIZE:
        raise ValueError(
            f"{name} must be a {DIGEST_SIZE}-byte SHA-256 digest, got {len(parent)} bytes; pass "
            f"ROOT_HASH or a hash returned by block_hash()"
        )
    return parent


def _check_tokens(tokens: object) -> list[int]:
    """``tokens`` as a list of plain ints in the encoding's range; TypeError / ValueError."""
    unordered = (set, frozenset, dict)
    if isinstance(tokens, (str, bytes, bytearray, *unordered)) or not isinstance(tokens, Iterable):
        raise TypeError(
            f"tokens must be a sequence of token ids (ints), got {tokens!r} "
            f"({type(tokens).__name__})"
        )
    ids = []
    for position, token in enumerate(tokens):
        value = as_index(token, f"token {position}")
        if not 0 <= value <= MAX_TOKEN:
            raise ValueError(
                f"token {position} must be a token id from 0 to 2**64 - 1, got {value}"
            )
        ids.append(value)
    return ids
