"""KV tensors behind the block bookkeeping: the caches the tiny transformer reads and writes.

* :mod:`kvcourse.kv.protocols`: what the model needs from a KV cache, and what a paged cache needs
  from a block table;
* :mod:`kvcourse.kv.cache`: a contiguous cache and a paged one (§4);
* :mod:`kvcourse.kv.sharing_cache`: a paged cache whose sequences fork and copy on write (§5);
* :mod:`kvcourse.kv.prefix_cache`: a paged cache whose prompts reuse cached prefixes (§8).
"""

from __future__ import annotations

from kvcourse.blocks.errors import UnknownSequenceError
from kvcourse.kv.cache import ContiguousKVCache, PagedKVCache, PagedView
from kvcourse.kv.prefix_cache import PrefixCachingKVCache
from kvcourse.kv.protocols import BlockTableLike, KVCache, ManagedKVCache
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
    "PrefixCachingKVCache",
]
