"""Block bookkeeping (§3-§5): which physical blocks hold which sequence's tokens, and nothing else.

No K or V lives here, and nothing imports torch: :mod:`kvcourse.kv` puts tensors behind these ids.

* :mod:`kvcourse.blocks.errors`: the exceptions the bookkeeping raises;
* :mod:`kvcourse.blocks.free_queue`: the pool's free blocks in eviction order, a linked queue;
* :mod:`kvcourse.blocks.pool`: the pool of physical blocks: free queue, reference counts and the
  block hashes of cached prefixes (§4.1, §8);
* :mod:`kvcourse.blocks.hashing`: chained block hashes, the names a prefix cache gives full blocks
  (§8.2);
* :mod:`kvcourse.blocks.hash_index`: the pool's map from block hashes to the blocks that hold them,
  one block per hash (the course's) or every copy (vLLM v1's);
* :mod:`kvcourse.blocks.prefix_cache`: automatic prefix caching on the pool: look up, take, name
  and give back a request's blocks (§8.3);
* :mod:`kvcourse.blocks.radix_cache`: a token-granular prefix cache, the radix tree of SGLang's
  RadixAttention, over a pool of KV slots (the page *Beyond block prefixes*);
* :mod:`kvcourse.blocks.token_replay`: one replay of a token workload for any prefix cache, and
  the block-aligned cache behind the radix tree's interface;
* :mod:`kvcourse.blocks.table`: one sequence's block table, logical → physical (§4.1);
* :mod:`kvcourse.blocks.sharing`: fork, append with copy-on-write, free (§5);
* :mod:`kvcourse.blocks.buddy`: a buddy allocator for contiguous KV regions (§3);
* :mod:`kvcourse.blocks.buddy_demo`: §3's 16-slot walk-through on that allocator.
"""

from __future__ import annotations

from kvcourse.blocks.buddy import (
    EX2_REQUESTS,
    BuddyAllocator,
    BuddyBlock,
    ContiguousAllocator,
    RoundingWaste,
    binary_decomposition,
    round_up_pow2,
    rounding_waste,
)
from kvcourse.blocks.buddy_demo import (
    WALKTHROUGH_REQUESTS,
    WalkthroughStep,
    buddy_walkthrough,
)
from kvcourse.blocks.errors import (
    OutOfBlocksError,
    SharedBlockWriteError,
    UnknownSequenceError,
)
from kvcourse.blocks.free_queue import FreeBlockQueue
from kvcourse.blocks.hash_index import HashIndex
from kvcourse.blocks.hashing import (
    ROOT_HASH,
    block_hash,
    chained_block_hashes,
    short_hash,
)
from kvcourse.blocks.pool import (
    BlockPool,
    Eviction,
    as_index,
)
from kvcourse.blocks.prefix_cache import PrefixAllocation, PrefixCache, PrefixMatch
from kvcourse.blocks.radix_cache import RadixCache, RadixNodeView
from kvcourse.blocks.sharing import (
    CopyOnWrite,
    ForkAppendFree,
    SharedBlockManager,
    check_manager,
)
from kvcourse.blocks.table import (
    BlockTable,
    BlockTableEntry,
)
from kvcourse.blocks.token_replay import (
    BlockPrefixAdapter,
    TokenPrefixCache,
    TokenReplay,
    replay_tokens,
)

__all__ = [
    "OutOfBlocksError",
    "SharedBlockWriteError",
    "UnknownSequenceError",
    "BlockPool",
    "Eviction",
    "FreeBlockQueue",
    "HashIndex",
    "as_index",
    "ROOT_HASH",
    "block_hash",
    "chained_block_hashes",
    "short_hash",
    "PrefixAllocation",
    "PrefixCache",
    "PrefixMatch",
    "RadixCache",
    "RadixNodeView",
    "BlockPrefixAdapter",
    "TokenPrefixCache",
    "TokenReplay",
    "replay_tokens",
    "BlockTable",
    "BlockTableEntry",
    "CopyOnWrite",
    "ForkAppendFree",
    "SharedBlockManager",
    "check_manager",
    "EX2_REQUESTS",
    "WALKTHROUGH_REQUESTS",
    "BuddyAllocator",
    "BuddyBlock",
    "ContiguousAllocator",
    "RoundingWaste",
    "WalkthroughStep",
    "binary_decomposition",
    "buddy_walkthrough",
    "round_up_pow2",
    "rounding_waste",
]
