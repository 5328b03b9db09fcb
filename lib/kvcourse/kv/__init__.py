"""KV tensors behind the block bookkeeping: the caches the tiny transformer reads and writes.

* :mod:`kvcourse.kv.cache`: the KV-cache interface, a contiguous cache and a paged one (§4);
* :mod:`kvcourse.kv.sharing_cache`: a paged cache whose sequences fork and copy on write (§5).
"""

from __future__ import annotations

from kvcourse.kv.cache import (
    BlockTableLike,
    ContiguousKVCache,
    KVCache,
    ManagedKVCache,
    PagedKVCache,
    PagedView,
    UnknownSequenceError,
)
from kvcourse.kv.sharing_cache import (
    SharedTableView,
    SharingPagedKVCache,
)

__all__ = [
    "KVCache",
    "ManagedKVCache",
    "UnknownSequenceError",
    "BlockTableLike",
    "PagedView",
    "ContiguousKVCache",
    "PagedKVCache",
    "SharedTableView",
    "SharingPagedKVCache",
]
