"""Tests for §6's preemption in the scheduler: a preempted request comes back by recomputation or by
swapping its blocks to a CPU pool (timed, and added to the iteration), or by whichever is cheaper;
a full CPU pool falls back to recompute; Max and Oracle never preempt and do not change; bad
configurations are refused clearly."""

from __future__ import annotations

import pytest

from kvcourse.blocks import BuddyAllocator
from kvcourse.serving import (
    RECOVERIES,
    IterationCost,
    OracleScheme,
    PagedScheme,
    SwapCost,
    VllmPaperScheduler,
    simulate,
)
from kvcourse.workloads import Request, sharegpt_like

UNIT = IterationCost(1.0, 0.0, 0.0)  # every iteration takes one second of compute and memory
#: 2 copies of 8 bytes per block at 8 B/s with 0.25 s each: 1.25 s a copy, 2.5 s a block.
SLOW_LINK = SwapCost(copy_bytes=8, copies_per_block=2, bandwidth=8.0, per_copy_s=0.25)


def ids(lives) -> list[int]:
    return [live.request.request_id for live in lives]


def three_that_outgrow_four_blocks() -> list[Request]:
    """Three requests of prompt 3, output 6 at t = 0 on 4 blocks of 4: each is admitted with one
    block, and at t = 1 all three need a second one, so request 2 is preempted."""
    return [Request(i, 0.0, 3, 6) for i in range(3)]


def test_recompute_re_prefills_the_prompt_and_the_generated_tokens():
    scheduler = VllmPaperScheduler(
        three_that_outgrow_four_blocks(), PagedScheme(4), num_slots=16, cost=UNIT
    )
    assert scheduler.recovery == "recompute" and scheduler.memory.cpu_pool is None
    its = list(scheduler)
    victim = its[1].preempted[0]
    assert ids([victim]) == [2] and scheduler.recomputations == scheduler.preemptions >= 1
    back = next(it for it in its[2:] if victim in it.admitted)
    assert back.new_tokens >= 3 + 1  # its prompt and the token it had, prefilled again
    assert scheduler.swap_outs == scheduler.swapped_out_blocks == 0 and scheduler.swap_s == 0


def test_swap_copies_the_blocks_out_and_back_and_the_copies_take_time():
    scheme = PagedScheme(4, recovery="swap", cpu_blocks=4, swap_cost=SLOW_LINK)
    assert scheme.label == "Paged (block 4, swap)" and scheme.name == "Paged"
    scheduler = VllmPaperScheduler(
        three_that_outgrow_four_blocks(), scheme, num_slots=16, cost=UNIT
    )
    cpu = scheduler.memory.cpu_pool
    assert cpu.num_blocks == 4
    scheduler.step()
    second = scheduler.step()  # request 2 (prompt 3 + 1 token: one block) goes to the CPU
    victim = second.preempted[0]
    assert ids([victim]) == [2] and victim.table is None and len(victim.cpu_blocks) == 1
    assert not victim.new  # its KV survives: it will resume decoding, not prefill
    assert (second.swapped_out, second.swapped_in) == (1, 0)
    assert second.swap_s == pytest.approx(2.5) and second.duration_s == pytest.approx(1 + 2.5)
    assert cpu.num_used == 1
    its = list(scheduler)
    back = next(it for it in its if victim in it.admitted)
    assert back.swapped_in == 1 and back.swap_s >= 2.5
    assert victim.cpu_blocks == () and cpu.num_used == 0
    assert scheduler.recomputed_tokens == 0 and scheduler.recomputations == 0
    assert scheduler.swap_outs == scheduler.preemptions == 2
    assert scheduler.swapped_out_blocks == scheduler.swapped_in_blocks == 3
    assert scheduler.swap_s == pytest.approx(3 * 2 * 2.5)  # out and in, 2.5 s a block
    assert sum(len(it.finished) for it in [second, *its]) == 3


def test_swapped_requests_decode_on_so_the_work_has_no_recomputation():
    requests = [Request(i, 0.1 * i, 5, 40) for i in range(12)]
    for recovery in RECOVERIES:
        scheme = PagedScheme(4, recovery=recovery, cpu_blocks=100, swap_cost=SLOW_LINK)
        scheduler = VllmPaperScheduler(
            requests, scheme, num_slots=96, cost=IterationCost(0.1, 0.0, 0.0)
        )
        new_tokens = sum(it.new_tokens for it in scheduler)
        work = sum(r.prompt_len + r.output_len - 1 for r in requests)
        assert scheduler.preemptions > 0
        assert new_tokens == work + scheduler.recomputed_tokens - scheduler.recomputations
        assert scheduler.swap_outs + scheduler.recomputations == scheduler.preemptions
        if recovery == "swap":
            assert scheduler.swap_outs == scheduler.preemptions  # the CPU pool is large enough
        if recovery == "cheaper":  # 2.5 s a block each way against 0 s to recompute
            assert scheduler.swap_outs == 0


def test_a_cpu_pool_as_large_as_the_gpu_pool_can_still_run_out():
    # The vLLM paper bounds the swap space by the GPU's KV memory. That is not exact: the running
    # requests grow into the blocks the victims freed, and later victims are larger. Here 17 of
    # the CPU pool's 24 blocks are taken when request 2 needs 8 more; it is recomputed instead.
    # (On the ShareGPT-like workloads the CPU pool's peak stays near a quarter of the GPU's.)
    requests = [Request(i, 0.1 * i, 5, 40) for i in range(12)]
    scheme = PagedScheme(4, recovery="swap", swap_cost=SLOW_LINK)  # CPU pool: 96 // 4 blocks
    scheduler = VllmPaperScheduler(
        requests, scheme, num_slots=96, cost=IterationCost(0.1, 0.0, 0.0)
    )
    assert scheduler.memory.cpu_pool.num_blocks == scheduler.memory.pool.num_blocks == 24
    fell_back = []
    for it in scheduler:
        fell_back += [live.request.request_id for live in it.preempted if live.new]
    assert fell_back == [2] and scheduler.swap_fallbacks == 1


def test_a_full_cpu_pool_falls_back_to_recompute():
    # One CPU block: request 2's first swap fits, request 1's two blocks do not.
    scheme = PagedScheme(4, recovery="swap", cpu_blocks=1, swap_cost=SLOW_LINK)
    scheduler = VllmPaperScheduler(
        three_that_outgrow_four_blocks(), scheme, num_slots=16, cost=UNIT
    )
    list(scheduler)
    assert scheduler.swap_outs == 1 and scheduler.swap_fallbacks == 1
    assert scheduler.recomputations == 1 and scheduler.recomputed_tokens == 3 + 5
    assert scheduler.memory.cpu_pool.num_used == 0


@pytest.mark.parametrize(
    ("link", "iteration", "swaps"),
    [
        (SwapCost(1, 2, bandwidth=1e9, per_copy_s=0), IterationCost(1.0, 0.0, 0.01), True),
        (SLOW_LINK, IterationCost(1.0, 0.0, 0.01), False),  # recompute: 0.01 s a token
        (SLOW_LINK, IterationCost(1.0, 0.0, 10.0), True),  # recompute: 10 s a token
    ],
)
def test_cheaper_compares_out_and_in_with_the_iteration_models_recompute(link, iteration, swaps):
    scheme = PagedScheme(4, recovery="cheaper", swap_cost=link)
    scheduler = VllmPaperScheduler(
        three_that_outgrow_four_blocks(), scheme, num_slots=16, cost=iteration
    )
    list(scheduler)
    assert scheduler.preemptions > 0
    assert (scheduler.swap_outs == scheduler.preemptions) is swaps
    assert (scheduler.recomputations == scheduler.preemptions) is not swaps


def test_opt13b_at_block_16_recomputes_and_at_block_32_swaps_when_cheaper():
    # The defaults (OPT-13B, PCIe 25 GB/s + 10 µs a copy, iteration model at 0.5 of peak):
    # out + in of a full block-16 block costs 2.65 ms, recomputing its 16 tokens 2.63 ms;
    # at block 32, 3.70 ms against 5.27 ms.
    requests = sharegpt_like(300, rate=4.0, seed=0)
    sixteen = simulate(requests, PagedScheme(16, recovery="cheaper"))
    thirty_two = simulate(requests, PagedScheme(32, recovery="cheaper"))
    assert sixteen.preemptions > 0 and thirty_two.preemptions > 0
    assert sixteen.recomputed_tokens > 0 and thirty_two.recomputed_tokens < 0.05 * (
        sixteen.recomputed_tokens
    )


def test_max_and_oracle_never_preempt_and_the_fix_left_them_alone():
    # Assignment a1's hidden tests pin these Oracle figures; the fix of the victims' order must
    # not move them (values from before the fix).
    result = simulate(
        sharegpt_like(600, rate=3.0, seed=0), OracleScheme(BuddyAllocator), num_slots=8192
    )
    assert result.preemptions == 0 and result.recomputed_tokens == 0
    expected = {
        "stored": 0.4104844465136372,
        "reserved": 0.2549749410377358,
        "internal": 0.2555866380417523,
        "external": 0.0524413880067252,
        "free": 0.02651258640014945,
    }
    for kind, share in result.shares.as_dict().items():
        assert share == pytest.approx(expected[kind], rel=1e-12, abs=0), kind
    assert (result.completed, result.iterations, result.total_iterations) == (132, 5353, 6695)


def test_bad_configurations_raise_clearly():
    with pytest.raises(ValueError, match="unknown recovery 'swapping'; pass one of recompute"):
        PagedScheme(recovery="swapping")
    with pytest.raises(ValueError, match="cpu_blocks must be zero or more"):
        PagedScheme(recovery="swap", cpu_blocks=-1)
    with pytest.raises(TypeError, match="cpu_blocks must be an int"):
        PagedScheme(recovery="swap", cpu_blocks=2.5)
    for recovery in ("swap", "cheaper"):
        with pytest.raises(ValueError, match="cpu_blocks=0: a CPU pool of no blocks"):
            PagedScheme(recovery=recovery, cpu_blocks=0)
    PagedScheme(recovery="recompute", cpu_blocks=0)  # nothing to swap, nothing wrong
    with pytest.raises(TypeError, match="swap_cost must be a SwapCost"):
        PagedScheme(recovery="swap", swap_cost=25e9)
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        PagedScheme(name="")
    requests = [Request(0, 0.0, 10, 10), Request(7, 1.0, 60, 40)]
    with pytest.raises(ValueError, match="request 7 needs 100 slots .* can never fit, even alone"):
        VllmPaperScheduler(requests, PagedScheme(16, recovery="swap"), num_slots=64)

    class Bogus(PagedScheme):
        recovery = "teleport"

        def __init__(self):
            super().__init__()
            self.recovery = "teleport"

    with pytest.raises(ValueError, match="recovery must be one of"):
        VllmPaperScheduler(requests[:1], Bogus(), num_slots=64)


def test_cpu_pool_defaults_to_the_gpu_pools_size_and_close_empties_it():
    scheme = PagedScheme(4, recovery="swap", swap_cost=SLOW_LINK)
    requests = three_that_outgrow_four_blocks()
    with VllmPaperScheduler(requests, scheme, num_slots=18, cost=UNIT, horizon_s=2.0) as run:
        assert run.memory.cpu_pool.num_blocks == 4  # 18 // 4, as the GPU pool
        list(run)
        assert run.memory.cpu_pool.num_used == 1  # request 2, swapped out at the horizon
    assert run.memory.cpu_pool.num_used == 0 and run.memory.allocated() == 0
    assert PagedScheme(16, recovery="cheaper").label == "Paged (block 16, swap or recompute)"
