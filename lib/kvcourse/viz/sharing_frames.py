"""Frames of §5's sharing pictures: several sequences' block tables over one pool, with reference
counts and the step's copy-on-writes, recorded from a block manager.

* :class:`SharingFrame` (made of :class:`SequenceSnapshot` rows) is the frozen picture;
  :func:`sharing_frame` takes it from any block manager with the
  :class:`~kvcourse.blocks.sharing.ForkAppendFree` interface (a student's too);
* :func:`fork_cow_frames` runs the vLLM paper's Fig. 8 example (a 7-token prompt, block size 4,
  forked into samples that each write one word) and records a frame after every operation;
  :func:`shared_prefix_frame` records requests whose tables point at one system prompt.

:mod:`kvcourse.viz.sharing` draws the frames.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from kvcourse._checks import ceil_div
from kvcourse.blocks.pool import BlockPool
from kvcourse.blocks.sharing import ForkAppendFree, SharedBlockManager, check_manager
from kvcourse.viz.block_table_frames import FOUR_SCORE_PROMPT
from kvcourse.viz.style import SEQUENCE_COLORS

__all__ = [
    "FORK_SAMPLE_WORDS",
    "SYSTEM_PROMPT",
    "SYSTEM_QUESTIONS",
    "SequenceSnapshot",
    "SharingFrame",
    "fork_cow_frames",
    "shared_prefix_frame",
    "sharing_frame",
]

#: The words the samples of :func:`fork_cow_frames` write after the shared prompt.
FORK_SAMPLE_WORDS: tuple[str, ...] = ("fathers", "mothers", "elders")
#: An 8-token system prompt (two full blocks of 4) for :func:`shared_prefix_frame`.
SYSTEM_PROMPT: tuple[str, ...] = ("You", "are", "a", "helpful", "tutor", ".", "Be", "brief")
#: Each request's own tokens after the system prompt.
SYSTEM_QUESTIONS: tuple[tuple[str, ...], ...] = (
    ("What", "is", "KV", "?"),
    ("Why", "pages", "?"),
    ("Define", "CoW"),
)


@dataclass(frozen=True)
class SequenceSnapshot:
    """One sequence in a :class:`SharingFrame`: its display ``name``, its physical blocks in
    logical order, the token texts it holds, how many of them (the last ones) this step wrote,
    and its colour."""

    name: str
    block_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    new_tokens: int
    color: str


@dataclass(frozen=True)
class SharingFrame:
    """Several sequences' block tables over one pool, after one step.

    ``ref_counts[b]`` is block ``b``'s reference count; ``copies`` lists this step's copy-on-writes
    as ``(source, target)`` block pairs, ``new_blocks`` the blocks this step allocated (copies
    included) and ``changed_refs`` the blocks whose count this step changed.
    """

    label: str
    sequences: tuple[SequenceSnapshot, ...]
    block_size: int
    ref_counts: tuple[int, ...]
    copies: tuple[tuple[int, int], ...] = ()
    new_blocks: tuple[int, ...] = ()
    changed_refs: tuple[int, ...] = ()

    @property
    def num_blocks(self) -> int:
        """Physical blocks in the pool."""
        return len(self.ref_counts)

    @property
    def num_used(self) -> int:
        """Blocks with at least one reference."""
        return sum(1 for c in self.ref_counts if c > 0)

    @property
    def blocks_unshared(self) -> int:
        """Blocks the same sequences would hold if none were shared."""
        return sum(ceil_div(len(s.tokens), self.block_size) for s in self.sequences)

    def block_tokens(self, block_id: int) -> tuple[str, ...]:
        """The token texts in physical block ``block_id`` (empty for a block no sequence lists).

        Every holder of a block agrees on its filled slots: only a sole holder writes."""
        size = self.block_size
        for seq in self.sequences:
            if block_id in seq.block_ids:
                i = seq.block_ids.index(block_id)
                return seq.tokens[i * size : (i + 1) * size]
        return ()

    def block_is_new(self, block_id: int) -> tuple[bool, ...]:
        """For each filled slot of ``block_id``: did this step write it (outlined in red)?"""
        size = self.block_size
        for seq in self.sequences:
            if block_id in seq.block_ids:
                i = seq.block_ids.index(block_id)
                first_new = len(seq.tokens) - seq.new_tokens
                stop = min(len(seq.tokens), (i + 1) * size)
                return tuple(p >= first_new for p in range(i * size, stop))
        return ()


def sharing_frame(
    manager: ForkAppendFree,
    tokens: Mapping[Hashable, Sequence[str]],
    label: str,
    *,
    names: Mapping[Hashable, str] | None = None,
    new_tokens: Mapping[Hashable, int] | None = None,
    copies: Sequence[tuple[int, int]] = (),
    new_blocks: Sequence[int] = (),
    previous: SharingFrame | None = None,
) -> SharingFrame:
    """Record the sequences of ``tokens`` (sequence id → token texts, in drawing order) as the
    block ``manager`` holds them now.

    Only the :class:`~kvcourse.blocks.sharing.ForkAppendFree` interface is used (``block_ids`` and
    the pool's ``ref_count``), so any manager can be drawn. ``previous`` (the frame before) lets
    the frame mark the reference counts that changed. Raises ``ValueError`` when a sequence's
    token count does not fit its block table.
    """
    manager = check_manager(manager)
    pool = manager.pool
    size = pool.block_size
    names = dict(names or {})
    new_tokens = dict(new_tokens or {})
    seqs = []
    for i, (seq_id, texts) in enumerate(tokens.items()):
        texts = tuple(str(t) for t in texts)
        ids = tuple(int(b) for b in manager.block_ids(seq_id))
        if len(ids) != ceil_div(len(texts), size):
            raise ValueError(
                f"sequence {seq_id!r} has {len(texts)} tokens but {len(ids)} blocks of {size}; "
                f"give the token texts the sequence holds now"
            )
        seqs.append(
            SequenceSnapshot(
                names.get(seq_id, str(seq_id)),
                ids,
                texts,
                int(new_tokens.get(seq_id, 0)),
                SEQUENCE_COLORS[i % len(SEQUENCE_COLORS)],
            )
        )
    counts = tuple(pool.ref_count(b) for b in range(pool.num_blocks))
    changed: tuple[int, ...] = ()
    if previous is not None and previous.num_blocks == len(counts):
        changed = tuple(b for b, c in enumerate(counts) if c != previous.ref_counts[b])
    return SharingFrame(
        label,
        tuple(seqs),
        size,
        counts,
        tuple((int(s), int(t)) for s, t in copies),
        tuple(int(b) for b in new_blocks),
        changed,
    )


def fork_cow_frames(
    prompt: Sequence[str] = FOUR_SCORE_PROMPT,
    words: Sequence[str] = FORK_SAMPLE_WORDS,
    *,
    block_size: int = 4,
    num_blocks: int = 5,
    manager_factory: Callable[[BlockPool], ForkAppendFree] = SharedBlockManager,
) -> list[SharingFrame]:
    """Parallel sampling in miniature (vLLM paper Fig. 8): prefill ``prompt`` once as sample 1,
    fork samples 2.. from it, then let sample ``i`` write ``words[i]``, in order.

    Returns a frame after the fork and after each sample's write. With the defaults (7 tokens,
    blocks of 4, three samples) the last prompt block is shared and partly filled, so samples 1
    and 2 each copy it and sample 3 finds its reference count back at 1 and writes in place.
    ``manager_factory`` builds the block manager over the pool (yours, for assignment a3).
    """
    prompt = [str(t) for t in prompt]
    words = [str(w) for w in words]
    if not prompt or not words:
        raise ValueError("give a non-empty prompt and at least one sample word")
    pool = BlockPool(num_blocks, block_size)
    manager = check_manager(manager_factory(pool), pool)
    samples = list(range(len(words)))
    names = {s: f"sample {s + 1}" for s in samples}
    texts = {s: list(prompt) for s in samples}
    manager.add_sequence(0)
    manager.append(0, len(prompt))
    for s in samples[1:]:
        manager.fork(0, s)
    ids = ", ".join(str(b) for b in manager.block_ids(0))
    n = len(samples)
    frame = sharing_frame(
        manager,
        texts,
        f"Prefill once, fork {n - 1} time{'s' if n > 2 else ''}: {n} tables share blocks {ids}",
        names=names,
        new_blocks=manager.block_ids(0),
    )
    frames = [frame]
    for s, word in zip(samples, words, strict=True):
        before = tuple(manager.block_ids(s))
        last = before[-1]
        refs = pool.ref_count(last)
        partly = len(texts[s]) % block_size != 0
        cows = manager.cow_count
        manager.append(s, 1)
        after = tuple(manager.block_ids(s))
        texts[s].append(word)
        copies = [(o, w) for o, w in zip(before, after, strict=False) if o != w]
        new = [b for b in after if b not in before]
        if manager.cow_count > cows:
            what = f"block {last} has ref {refs}: copy it to block {copies[0][1]}, then write"
        elif partly:
            what = f"block {last} has ref {refs}: write in place, no copy"
        else:
            what = f"block {last} is full: write into new block {new[0]}"
        frame = sharing_frame(
            manager,
            texts,
            f"{names[s].capitalize()} writes “{word}”: {what}",
            names=names,
            new_tokens={s: 1},
            copies=copies,
            new_blocks=new,
            previous=frame,
        )
        frames.append(frame)
    return frames


def shared_prefix_frame(
    prefix: Sequence[str] = SYSTEM_PROMPT,
    questions: Sequence[Sequence[str]] = SYSTEM_QUESTIONS,
    *,
    block_size: int = 4,
    num_blocks: int | None = None,
    manager_factory: Callable[[BlockPool], ForkAppendFree] = SharedBlockManager,
) -> SharingFrame:
    """A system prompt stored once (a sequence of its own, kept alive like a shared library) and
    one request per entry of ``questions`` that forks it and appends its own tokens. The pool
    has ``num_blocks`` blocks; by default what sharing needs and one more."""
    prefix = [str(t) for t in prefix]
    if not prefix or not questions:
        raise ValueError("give a non-empty prefix and at least one request")
    if num_blocks is None:  # what sharing needs, and one free block to show the pool
        full = len(prefix) // block_size
        num_blocks = ceil_div(len(prefix), block_size) + 1
        num_blocks += sum(ceil_div(len(prefix) + len(q), block_size) - full for q in questions)
    pool = BlockPool(num_blocks, block_size)
    manager = check_manager(manager_factory(pool), pool)
    manager.add_sequence("prefix")
    manager.append("prefix", len(prefix))
    texts: dict[Hashable, list[str]] = {"prefix": list(prefix)}
    names: dict[Hashable, str] = {"prefix": "system\nprompt"}
    for r, question in enumerate(questions):
        manager.fork("prefix", r)
        manager.append(r, len(question))
        texts[r] = list(prefix) + [str(t) for t in question]
        names[r] = f"request {r + 1}"
    n_prefix = len(manager.block_ids("prefix"))
    return sharing_frame(
        manager,
        texts,
        f"{len(questions)} requests point at the {n_prefix} blocks of one system prompt",
        names=names,
        new_tokens={r: len(q) for r, q in enumerate(questions)},
    )
