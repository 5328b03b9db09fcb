"""Beam search counted on block bookkeeping alone (§5.2, Ex 5): the tokens the full-copy scheme
copies against the copy-on-writes of the paged one, for *given* parent choices, with no model.

At each step every new beam forks its parent, the old generation is freed, and the new beams
append one token each. The full-copy scheme copies ``k × Σ_{s=0}^{S−1} (P + s)`` tokens (Ex 5:
``4 × [64 + Σ_{s=1}^{31} (64 + s)] = 10,176``); the paged scheme copies only when siblings write
into their parent's shared, partly filled last block: at step ``s``,
``k − (number of distinct parents)`` copies if ``(P + s) mod B ≠ 0``, else none
(:func:`expected_cow_count`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kvcourse._checks import ceil_div, check_count, check_positive_int, is_int
from kvcourse.blocks.sharing import SharedBlockManager
from kvcourse.generation._setup import (
    ManagerFactory,
    append_counting,
    fraction_saved,
    free_all,
    new_manager,
)

__all__ = [
    "BeamCopyReport",
    "expected_cow_count",
    "full_copy_tokens",
    "random_parent_choices",
    "scripted_beam_search",
]


def full_copy_tokens(beam_width: int = 4, prompt_len: int = 64, steps: int = 32) -> int:
    """Tokens the full-copy scheme copies: at step ``s`` (0-based) each of the ``k`` new beams
    copies its parent's ``P + s`` tokens, so ``k × Σ_{s=0}^{S−1} (P + s)``.

    Ex 5: ``full_copy_tokens(4, 64, 32) = 4 × [64 + Σ_{s=1}^{31} (64 + s)] = 10,176``.
    """
    k = check_positive_int("beam_width", beam_width)
    p = check_positive_int("prompt_len", prompt_len)
    s = check_count("steps", steps)
    return k * (s * p + s * (s - 1) // 2)


def random_parent_choices(
    beam_width: int = 4, steps: int = 32, *, seed: int = 0
) -> tuple[tuple[int, ...], ...]:
    """Seeded parent choices for :func:`scripted_beam_search`: step 0 forks every beam from the
    prompt (parent 0); at each later step each of the ``k`` new beams picks a parent among the
    ``k`` old ones uniformly at random (Python's ``random.Random(seed)``), listed in ascending
    order as beam search lists children of better parents first."""
    k = check_positive_int("beam_width", beam_width)
    s = check_count("steps", steps)
    rng = random.Random(seed)
    choices = [(0,) * k] if s else []
    for _ in range(1, s):
        choices.append(tuple(sorted(rng.randrange(k) for _ in range(k))))
    return tuple(choices)


def expected_cow_count(
    parents: Sequence[Sequence[int]], prompt_len: int = 64, block_size: int = 16
) -> int:
    """Copy-on-writes the paged scheme makes for ``parents`` (see :func:`scripted_beam_search`).

    At step ``s`` the parents hold ``P + s`` tokens. If that is a multiple of ``B`` the new token
    goes into a new block and nothing is copied; otherwise a parent chosen by ``c`` new beams has
    its partly filled last block copied ``c − 1`` times, which sums to ``k − distinct parents``.
    """
    p = check_positive_int("prompt_len", prompt_len)
    size = check_positive_int("block_size", block_size)
    return sum(len(step) - len(set(step)) for s, step in enumerate(parents) if (p + s) % size != 0)


@dataclass(frozen=True)
class BeamCopyReport:
    """Copies and memory of beam search under the two schemes (§5.2, Ex 5).

    ``full_copy_tokens``: tokens the full-copy scheme copies (every new beam copies its parent's
    whole KV). ``cow_count`` copy-on-writes of the paged scheme copied ``cow_tokens`` filled token
    slots; a block-granular copy kernel moves ``cow_block_slots = cow_count × block_size`` (the
    lecture's "35 CoW × 16 = 560"). Memory after each step, in blocks: ``blocks_shared`` (the
    pool) and ``blocks_unshared`` (every beam with its own copy). ``leaked_blocks``: what the
    pool still held after all beams were freed (0 when right).
    """

    beam_width: int
    prompt_len: int
    steps: int
    block_size: int
    parents: tuple[tuple[int, ...], ...]
    full_copy_tokens: int
    cow_count: int
    cow_tokens: int
    blocks_shared: tuple[int, ...]
    blocks_unshared: tuple[int, ...]
    leaked_blocks: int

    @property
    def cow_block_slots(self) -> int:
        """``cow_count × block_size``: slots moved when each copy moves a whole block."""
        return self.cow_count * self.block_size

    @property
    def copy_ratio(self) -> float:
        """How many times less the paged scheme copies, counting whole blocks (``inf`` if it
        copied nothing)."""
        slots = self.cow_block_slots
        return self.full_copy_tokens / slots if slots else float("inf")

    @property
    def peak_blocks_shared(self) -> int:
        """Most blocks the pool held at the end of a step."""
        return max(self.blocks_shared)

    @property
    def peak_blocks_unshared(self) -> int:
        """Most blocks the beams would hold with a copy each."""
        return max(self.blocks_unshared)

    @property
    def memory_saved(self) -> float:
        """``1 − peak shared / peak unshared``, a fraction."""
        return fraction_saved(self.peak_blocks_shared, self.peak_blocks_unshared)

    @property
    def mean_memory_saved(self) -> float:
        """``1 − Σ shared / Σ unshared`` over the steps: the saving averaged over time."""
        return fraction_saved(sum(self.blocks_shared), sum(self.blocks_unshared))


def _check_parents(
    parents: Sequence[Sequence[int]], beam_width: int, steps: int
) -> tuple[tuple[int, ...], ...]:
    """``parents`` as tuples of plain ints, one per step, each index in range for its step."""
    if isinstance(parents, (str, bytes)) or len(parents) != steps:
        raise ValueError(
            f"parents must list one step of parent indices for each of the {steps} steps, got "
            f"{len(parents) if not isinstance(parents, (str, bytes)) else parents!r}"
        )
    checked = []
    for s, step in enumerate(parents):
        step = tuple(step)
        choices = 1 if s == 0 else beam_width  # step 0 has one parent: the prompt
        if len(step) != beam_width or not all(is_int(i) and 0 <= i < choices for i in step):
            raise ValueError(
                f"step {s}: need {beam_width} parent indices in 0..{choices - 1} (one per new "
                f"beam{'; step 0 forks every beam from the prompt, index 0' if s == 0 else ''}), "
                f"got {step!r}"
            )
        checked.append(tuple(int(i) for i in step))
    return tuple(checked)


def scripted_beam_search(
    parents: Sequence[Sequence[int]] | None = None,
    *,
    beam_width: int = 4,
    prompt_len: int = 64,
    steps: int = 32,
    block_size: int = 16,
    seed: int = 0,
    manager_factory: ManagerFactory = SharedBlockManager,
) -> BeamCopyReport:
    """Beam search with given parent choices, counted under both schemes (Ex 5).

    ``parents[s][j]`` is the index (among the beams of step ``s − 1``) of new beam ``j``'s parent;
    step 0's parent is the prompt, so ``parents[0]`` is all zeros. By default the choices come
    from :func:`random_parent_choices` with ``seed``. At each step the new beams fork their
    parents, the old beams are freed, and each new beam appends one token, in order. The count
    of copy-on-writes equals :func:`expected_cow_count` exactly, and the full-copy scheme's
    tokens equal :func:`full_copy_tokens`.
    """
    k = check_positive_int("beam_width", beam_width)
    p = check_positive_int("prompt_len", prompt_len)
    n_steps = check_count("steps", steps)
    size = check_positive_int("block_size", block_size)
    if parents is None:
        parents = random_parent_choices(k, n_steps, seed=seed)
    script = _check_parents(parents, k, n_steps)
    manager = new_manager(manager_factory, k * ceil_div(p + n_steps, size) + k + 1, size)
    pool = manager.pool
    manager.add_sequence(0)
    manager.append(0, p)
    live: list[int] = [0]
    next_id = 1
    full_copy = cows = cow_tokens = 0
    shared, unshared = [pool.num_used], [ceil_div(p, size)]
    for s, step in enumerate(script):
        length = p + s
        children = list(range(next_id, next_id + k))
        next_id += k
        for child, parent in zip(children, step, strict=True):
            manager.fork(live[parent], child)
            full_copy += length
        for old in live:
            manager.free(old)
        for child in children:
            made, slots = append_counting(manager, child, length, 1)
            cows, cow_tokens = cows + made, cow_tokens + slots
        live = children
        shared.append(pool.num_used)
        unshared.append(k * ceil_div(length + 1, size))
    leaked = free_all(manager, live)
    return BeamCopyReport(
        k,
        p,
        n_steps,
        size,
        script,
        full_copy,
        cows,
        cow_tokens,
        tuple(shared),
        tuple(unshared),
        leaked,
    )
