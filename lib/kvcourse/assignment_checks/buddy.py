"""Helpers for the visible test cells of assignment a1 (the buddy allocator): run a student's
allocator through a cell's steps and compare what it returns and leaves free, as plain ints, with
the values the cell gives, so that a test cell reads as the checks it makes.

* :func:`expect_alloc`, :func:`expect_free`, :func:`expect_refused_free` and
  :func:`expect_state`: one call, and what it must return, raise or leave free;
* :func:`free_works`: whether ``free`` works yet (Part 2's tests run before Part 3 is written);
* :func:`expect_tokens`, :func:`simulate_oracle` and :func:`expect_shares`: Part 6's run of the
  simulator on the student's allocator, and its shares beside the library's;
* :class:`PerRootArena`: an arena of any size (the A100's 12,596 slots) as one of the student's
  allocators per power-of-two root, for Part 6's hidden run.

Each helper takes the expected values and the hint from the cell, runs student code only through
the objects it is given, and compares plain values only. Only the visible cells use these: a
student can rebind them before the visible tests run, so the hidden cells make their own checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType

from kvcourse.assignment_checks.readers import arena_state
from kvcourse.assignment_checks.values import as_int_or_none, expect_equal, expect_error

__all__ = [
    "OracleRun",
    "PerRootArena",
    "expect_alloc",
    "expect_free",
    "expect_refused_free",
    "expect_shares",
    "expect_state",
    "expect_tokens",
    "free_works",
    "simulate_oracle",
]

Blocks = Sequence[tuple[int, int]]


def expect_state(arena: object, free: int | None, blocks: Blocks, what: str, hint: str) -> None:
    """Fail unless ``arena.free_slots()`` is ``free`` and ``arena.free_blocks()`` is ``blocks``:
    "{what}: expected free_slots() = {free} and free_blocks() = {blocks}, got {…} and {…}. Hint:
    {hint}". With ``free`` None, free_slots() is read (it must be an int) but not compared."""
    got_free, got_blocks = arena_state(arena, what)
    blocks = [(int(offset), int(size)) for offset, size in blocks]
    if free is None:
        expect_equal(got_blocks, blocks, what, hint, label="free_blocks() = ")
    elif not (got_free == int(free) and got_blocks == blocks):
        raise AssertionError(
            f"{what}: expected free_slots() = {free} and free_blocks() = {blocks}, got "
            f"{got_free} and {got_blocks}. Hint: {hint}"
        )


def expect_alloc(arena: object, num_slots: int, offset: int | None, what: str, hint: str) -> None:
    """``arena.alloc(num_slots)``, which must return ``offset`` (an int, or None for a refusal):
    "{what}: expected alloc({num_slots}) to return {offset}, got {…}. Hint: {hint}"."""
    got = as_int_or_none(arena.alloc(num_slots), f"{what}: alloc({num_slots})")
    expect_equal(got, offset, what, hint, label=f"alloc({num_slots}) to return ")


def expect_free(arena: object, offset: int, blocks: Blocks, what: str, hint: str) -> None:
    """``arena.free(offset)``, after which ``free_blocks()`` must be ``blocks`` and
    ``free_slots()`` their total (as :func:`expect_state`, with "{what}, after free({offset})").
    An error raised by ``free`` propagates, with its traceback in the student's code."""
    arena.free(offset)
    free = sum(int(size) for _, size in blocks)
    expect_state(arena, free, blocks, f"{what}, after free({offset})", hint)


def expect_refused_free(
    arena: object, offset: int, free: int | None, blocks: Blocks, what: str, hint: str
) -> None:
    """``arena.free(offset)``, which must raise ``ValueError`` ("free({offset}), {what}: expected
    ValueError, but it returned. Hint: {hint}") and leave ``free`` slots free as ``blocks``, as
    :func:`expect_state` ("…, raised but changed the arena"). Another error propagates."""
    call = f"free({offset}), {what}"
    expect_error(ValueError, partial(arena.free, offset), call, hint)
    expect_state(arena, free, blocks, f"{call}, raised but changed the arena", hint)


def free_works(arena: object, offset: int, free: int, blocks: Blocks) -> bool:
    """Whether ``arena.free(offset)`` returns and leaves ``free`` slots free as ``blocks``; False,
    never an error, when it raises or leaves anything else (as when ``free`` is not written yet)."""
    try:
        arena.free(offset)
        got = arena_state(arena, f"after free({offset})")
    except Exception:
        return False
    return got == (int(free), [(int(o), int(s)) for o, s in blocks])


def expect_tokens(requests: Sequence[object], tokens: tuple[int, int]) -> None:
    """Fail unless ``requests`` hold ``tokens`` = (prompt, output) tokens in all: a check of the
    test itself, that its requests are the ones its expected values come from."""
    got = (sum(r.prompt_len for r in requests), sum(r.output_len for r in requests))
    if got != tuple(tokens):
        raise AssertionError(
            f"the test's requests hold {got} prompt and output tokens, not {tuple(tokens)}: they "
            "are not the requests its expected values come from. Ask your instructor."
        )


@dataclass(frozen=True)
class OracleRun:
    """What :func:`simulate_oracle` saw, as plain values: each kind's share of the arena
    (``serving.KINDS``: stored, reserved, …), the mean number of requests running at once, and
    how many requests completed."""

    shares: dict[str, float]
    mean_running: float
    completed: int


def simulate_oracle(
    serving: ModuleType,
    allocator: Callable[[int], object],
    requests: Sequence[object],
    *,
    num_slots: int,
    promise_hint: str,
    split_hint: str,
    merge_hint: str,
) -> OracleRun:
    """Run ``serving.simulate`` (a private copy of the simulator) with the Oracle scheme on
    ``allocator`` (the student's class) and ``num_slots`` slots, and read the result as plain
    values. When the run stops, fail saying why and where to look: the simulator caught the
    allocator breaking a promise (``promise_hint``), or it refused a request with nothing running,
    and the last arena, every block freed again, is either one free block (``split_hint``: alloc
    does not split) or not (``merge_hint``: free does not merge). Other errors propagate."""
    arenas: list[object] = []

    def yours(size: int) -> object:
        arenas.append(allocator(size))  # kept, to show its state if the run stops
        return arenas[-1]

    try:
        result = serving.simulate(requests, serving.OracleScheme(yours), num_slots=num_slots)
    except serving.AllocatorContractError as err:
        raise AssertionError(
            f"the simulator caught your allocator breaking a promise: {err}. Hint: {promise_hint}"
        ) from None
    except RuntimeError as err:  # a request refused with nothing running: the arena is empty
        if type(err) is not RuntimeError or not arenas:  # NotImplementedError is one too
            raise
        free, blocks = arena_state(arenas[-1], "your allocator, with every block freed")
        if blocks == [(0, num_slots)]:
            where = (
                "holds the whole arena as one free block, and yet refused the request. Hint: "
                + split_hint.rstrip(".")
            )
        else:
            more = f" and {len(blocks) - 4} more" if len(blocks) > 4 else ""
            where = (
                f"has its {free} free slots as {blocks[:4]}{more}, not as one block "
                f"[(0, {num_slots})]. Hint: {merge_hint.rstrip('.')}"
            )
        raise AssertionError(
            f"the simulator stopped: {str(err).split('; clip')[0]}. With every request's block "
            f"freed again, your allocator {where}."
        ) from None
    return OracleRun(
        shares={kind: float(getattr(result.shares, kind)) for kind in serving.KINDS},
        mean_running=float(result.mean_running),
        completed=int(result.completed),
    )


def expect_shares(
    got: Mapping[str, float], expected: Mapping[str, float], what: str, hint: str
) -> None:
    """Print ``what``, then each kind's share, ``got`` beside ``expected``, as percentages; then
    fail at the first kind whose share differs beyond rounding: "{what}: the {kind} share is {…};
    with the library's buddy allocator it is {…}. Hint: {hint}"."""
    print(f"{what}\n{'':>20}  {'yours':>7}  {'library':>7}")
    for kind, share in expected.items():
        print(f"{kind:>20}  {float(got[kind]):7.2%}  {share:7.2%}")
    for kind, share in expected.items():
        if not math.isclose(float(got[kind]), share, rel_tol=1e-9, abs_tol=1e-12):
            raise AssertionError(
                f"{what}: the {kind} share is {float(got[kind]):.6f}; with the library's buddy "
                f"allocator it is {share:.6f}. Hint: {hint}"
            )


class PerRootArena:
    """An arena of ``num_slots`` slots (any size) made of one ``allocator(size)`` per root block of
    :func:`~kvcourse.blocks.buddy.binary_decomposition` (12,596 slots: roots of 8192, 4096, 256,
    32, 16 and 4), for a student's allocator that manages one power-of-two arena.

    A request goes to the smallest free block that fits it across every root, the lowest offset
    among equals, which is the block the library's buddy allocator over the whole arena takes;
    offsets are the arena's own (a root's offset plus the offset in it)."""

    def __init__(self, allocator: Callable[[int], object], num_slots: int) -> None:
        # The roots worked out here: the tests switch the library's buddy module off around this.
        sizes = [1 << bit for bit in range(int(num_slots).bit_length() - 1, -1, -1)]
        sizes = [size for size in sizes if num_slots & size]
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self.parts = [(start, allocator(size)) for start, size in zip(starts, sizes, strict=True)]

    def alloc(self, num_slots: int) -> int | None:
        """The offset of a run of at least ``num_slots`` slots, or None when no root has one."""
        fits = [
            (int(size), start + int(offset), start, part)
            for start, part in self.parts
            for offset, size in part.free_blocks()
            if size >= num_slots
        ]
        if not fits:
            return None
        _, _, start, part = min(fits, key=lambda fit: fit[:2])
        return start + int(part.alloc(num_slots))

    def free(self, offset: int) -> None:
        """Free the run at ``offset``, in the root it lies in."""
        start, part = max(((s, p) for s, p in self.parts if s <= offset), key=lambda sp: sp[0])
        part.free(offset - start)

    def free_slots(self) -> int:
        """The free slots of every root."""
        return sum(int(part.free_slots()) for _, part in self.parts)

    def free_blocks(self) -> list[tuple[int, int]]:
        """Every root's free blocks as ``(offset, size)`` in the arena, sorted by offset."""
        return sorted(
            (start + int(offset), int(size))
            for start, part in self.parts
            for offset, size in part.free_blocks()
        )
