"""kvcourse.assignment_checks.cow, the helpers of a3's visible test cells: run on the library's
own manager they give the worked answers, a wrong manager fails with the expected value, what came
back and the hint, and only plain values are compared; fast unit tests, no notebooks."""

from __future__ import annotations

from functools import partial

import pytest

from kvcourse.assignment_checks import fresh_copy
from kvcourse.assignment_checks.cow import (
    Beams,
    BeamSearch,
    beam_search,
    call_text,
    expect_held,
    expect_refusal,
    expect_shared,
    expect_write,
    forked,
    parallel_sampling,
    random_parents,
    run_beams,
    shared_state,
    write,
)
from kvcourse.blocks import BlockPool, OutOfBlocksError, SharedBlockManager


class Agreeable(int):
    """An int that claims to equal anything: a helper that asked it would be fooled."""

    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class NoCopies(SharedBlockManager):
    """Copy-on-write without counting it (a3's sample uncounted_copies)."""

    @property
    def cow_count(self):
        return 0


class Boasting(SharedBlockManager):
    """A cow_count that claims to be whatever it is compared with."""

    @property
    def cow_count(self):
        return Agreeable(5)


class OneTokenShort(SharedBlockManager):
    """An append of one token always runs out of blocks (a prompt still fits)."""

    def append(self, seq_id, num_tokens=1):
        if num_tokens == 1:
            raise OutOfBlocksError("no")
        super().append(seq_id, num_tokens)


# ------------------------------------------------------------------------- states and errors
def test_call_text_writes_the_call():
    manager = SharedBlockManager(BlockPool(2, 4))
    assert call_text(partial(manager.fork, "nobody", 9)) == "fork('nobody', 9)"
    assert call_text(partial(manager.append, "A")) == "append('A')"
    assert call_text(partial(manager.append, "A", num_tokens=2)) == "append('A', num_tokens=2)"


def test_expect_refusal_names_the_call():
    manager = SharedBlockManager(BlockPool(2, 4))
    expect_refusal(KeyError, partial(manager.fork, "nobody", 9), "hint")
    manager.add_sequence(0)
    with pytest.raises(AssertionError) as caught:
        expect_refusal(ValueError, partial(manager.append, 0, 1), "a count is fine.")
    assert str(caught.value) == (
        "append(0, 1): expected ValueError, but it returned. Hint: a count is fine."
    )


def test_expect_held_checks_each_sequence_then_the_free_blocks():
    pool = BlockPool(8, 4, taken=[0, 2, 3, 5, 6])
    manager = SharedBlockManager(pool)
    manager.add_sequence("A")
    manager.append("A", 7)
    expect_held(manager, {"A": (7, [1, 4])}, "after the prompt", "hint", free=(pool, 1))
    with pytest.raises(AssertionError) as caught:
        expect_held(manager, {"A": (7, [1, 5])}, "after the prompt", "lowest ids first.")
    assert str(caught.value) == (
        "after the prompt: expected (num_tokens, block_ids) of 'A' = (7, [1, 5]), got (7, [1, 4])."
        " Hint: lowest ids first."
    )
    with pytest.raises(AssertionError, match=r"expected free blocks in the pool: 0, got 1\."):
        expect_held(manager, {"A": (7, [1, 4])}, "after the prompt", "hint", free=(pool, 0))
    manager.add_sequence(0)
    with pytest.raises(AssertionError, match=r"of 0 = \(1, \[\]\), got \(0, \[\]\)"):
        expect_held(manager, {"A": (7, [1, 4]), 0: (1, [])}, "two", "hint")


def test_shared_state_and_expect_shared_on_fig_8():
    pool = BlockPool(5, 4)
    manager = forked(SharedBlockManager, pool, 7, [0, 1, 2])
    three = {0: [0, 1], 1: [0, 1], 2: [0, 1]}, [3, 3, 0, 0, 0], 0
    assert shared_state(manager, pool, [0, 1, 2], "forks") == three
    expect_shared(manager, pool, three, "forks", "hint")
    expect_write(manager, pool, 0, ({0: [0, 2], 1: [0, 1]}, [3, 2, 1, 0, 0], 1), "fathers", "")
    with pytest.raises(AssertionError) as caught:
        expect_shared(manager, pool, three, "after a write", "copy it.")
    assert str(caught.value) == (
        "after a write: expected (block tables, reference counts of blocks 0..4, cow_count) = "
        "({0: [0, 1], 1: [0, 1], 2: [0, 1]}, [3, 3, 0, 0, 0], 0), got ({0: [0, 2], 1: [0, 1], "
        "2: [0, 1]}, [3, 2, 1, 0, 0], 1) (not as expected: block tables, reference counts, "
        "cow_count). Hint: copy it."
    )


def test_expect_shared_compares_plain_values_and_says_what_differs():
    pool = BlockPool(5, 4)
    for manager_class, cows in [(NoCopies, "0"), (Boasting, "5")]:
        manager = forked(manager_class, pool := BlockPool(5, 4), 7, [0, 1])
        write(manager, pool, 0, 1, "write", "hint")
        with pytest.raises(AssertionError) as caught:
            expect_shared(manager, pool, ({0: [0, 2], 1: [0, 1]}, [2, 1, 1, 0, 0], 1), "w", "h")
        assert str(caught.value).endswith(
            f"[2, 1, 1, 0, 0], {cows}) (not as expected: cow_count). Hint: h"
        )


def test_write_blames_append_when_the_pool_had_room():
    pool = BlockPool(5, 4)
    manager = forked(OneTokenShort, pool, 0, [0, 1])
    with pytest.raises(AssertionError) as caught:
        write(manager, pool, 1, 1, "sample 1 writes", "copy only a shared block.")
    assert str(caught.value) == (
        "sample 1 writes: append(1, 1) raised OutOfBlocksError, but 5 of the pool's blocks were "
        "free (reference counts [0, 0, 0, 0, 0]), enough for it. Hint: copy only a shared block."
    )


# --------------------------------------------------------------------------------- scenarios
def test_forked_holds_the_prompt_in_the_first_id_and_forks_the_others():
    pool = BlockPool(2, 4)
    manager = forked(SharedBlockManager, pool, 7, ["p", "c"])
    assert shared_state(manager, pool, ["p", "c"], "") == ({"p": [0, 1], "c": [0, 1]}, [2, 2], 0)
    assert manager.num_tokens("c") == 7


def test_parallel_sampling_gives_ex_4():
    hint = "copy only a shared, partly filled last block."
    assert parallel_sampling(SharedBlockManager, 100, range(2, 9), 40, 16, hint) == (
        [1, 2, 3, 4, 5, 6, 7],
        [0] * 7,
    )
    assert parallel_sampling(SharedBlockManager, 96, [2, 8], 40, 16, hint) == ([0, 0], [0, 0])
    copies, left = parallel_sampling(NoCopies, 100, [3], 4, 16, hint)
    assert (copies, left) == ([0], [0]) and all(type(x) is int for x in copies + left)
    with pytest.raises(AssertionError, match=r"^Ex 4, prompt 10, n = 2: append\(0, 1\) raised"):
        parallel_sampling(OneTokenShort, 10, [2], 1, 4, hint)


def test_random_parents_are_seeded_and_start_from_the_prompt():
    parents = random_parents(4, 32, seed=0)
    assert len(parents) == 32 and parents[0] == (0, 0, 0, 0)
    assert parents == random_parents(4, 32, seed=0) != random_parents(4, 32, seed=1)
    assert all(list(step) == sorted(step) and max(step) < 4 for step in parents)


def test_run_beams_gives_the_worked_example_and_the_lecture_setting():
    hint = "free every block."
    run = run_beams(SharedBlockManager, [(0, 0, 0), (0, 0, 2), (1, 1, 1), (2, 2, 0)], 6, 4, hint)
    assert run == Beams(copies=[2, 1, 0, 1], used=[4, 4, 5, 5], leaked=0)
    run = run_beams(SharedBlockManager, random_parents(4, 32, seed=0), 64, 16, hint)
    assert (sum(run.copies), max(run.used), run.leaked) == (38, 10, 0)
    with pytest.raises(AssertionError) as caught:
        run_beams(OneTokenShort, [(0, 0)], 6, 4, hint)
    assert str(caught.value) == (
        "beam search, step 0: append(1, 1) ran out of blocks; the pool has room for a copy per "
        "beam. After the steps before, the blocks used were []. Hint: free every block."
    )


# ---------------------------------------------------------------- the tiny transformer, shared
def fresh_model():
    fresh = fresh_copy("kvcourse.kv", "kvcourse.model", share=("kvcourse.blocks",))
    return fresh, fresh.model.TinyTransformer(seed=0)


def test_beam_search_on_the_library_manager():
    fresh, model = fresh_model()
    run = beam_search(
        fresh, model, SharedBlockManager, [1, 2, 3, 4, 5], k=2, steps=3, block_size=4, hint="h"
    )
    assert isinstance(run, BeamSearch) and len(run.beams) == 2 and run.leaked == 0
    assert all(len(beam) == 3 and all(type(t) is int for t in beam) for beam in run.beams)
    assert type(run.cows) is int and type(run.copied) is int and run.cows >= 1


def test_beam_search_runs_on_a_fresh_copy_and_blames_append():
    fresh, model = fresh_model()
    with pytest.raises(TypeError, match="fresh_copy"):
        beam_search({}, model, SharedBlockManager, [1], k=2, steps=1, block_size=4, hint="h")
    with pytest.raises(AssertionError) as caught:
        beam_search(fresh, model, OneTokenShort, [1, 2], k=2, steps=1, block_size=4, hint="h")
    assert str(caught.value).startswith("beam search, step 1: the cache's append on your ")
    assert str(caught.value).endswith("the pool has room for a copy per beam. Hint: h")
