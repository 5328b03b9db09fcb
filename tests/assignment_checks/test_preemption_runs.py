"""The runs a4's hidden tests have made where the student's code runs
(kvcourse.assignment_checks.preemption_runs): what they record, and that they record without
judging."""

from __future__ import annotations

import pytest

from kvcourse.assignment_checks.harness import fresh_copy
from kvcourse.assignment_checks.preemption_runs import probe_runs, subclasses_directly
from kvcourse.serving import IterationCost, IterationScheduler, PagedScheme, VllmPaperScheduler
from kvcourse.workloads import Request

#: §6's example: four requests on a pool of 6 blocks of 4 slots; C is preempted once.
ROWS = [(0, 0.0, 5, 9), (1, 0.0, 3, 6), (2, 1.0, 4, 4), (3, 2.0, 6, 3)]
UNIT = (1.0, 0.0, 0.0)
CASE = (ROWS, (4, "recompute", None, None), 24, UNIT)


class Written(IterationScheduler):
    """A student's scheduler written as the reference is, subclassing the base directly."""

    choose_victim = VllmPaperScheduler.choose_victim
    preempt = VllmPaperScheduler.preempt
    recover = VllmPaperScheduler.recover


def test_a_run_records_what_the_scheduler_did_iteration_by_iteration():
    (record,) = probe_runs(VllmPaperScheduler, "all", [CASE], steps=True)
    requests = [Request(*row) for row in ROWS]
    with VllmPaperScheduler(
        requests, PagedScheme(4), num_slots=24, cost=IterationCost(*UNIT)
    ) as run:
        steps = list(run)
    assert record.error is None
    assert len(record.steps) == len(steps) == record.counter("iterations") == run.iterations
    assert [s.preempted for s in record.steps] == [
        tuple(live.order for live in s.preempted) for s in steps
    ]
    assert record.counter("preemptions") == run.preemptions >= 1
    assert sorted(order for order, _ in record.preemptions_of) == [0, 1, 2, 3]
    assert all(s.waiting == tuple(sorted(s.waiting)) for s in record.steps)


def test_choices_are_recorded_and_a_choice_the_run_cannot_go_on_from_ends_it():
    (record,) = probe_runs(VllmPaperScheduler, "choose_victim", [CASE])
    assert record.error is None and record.choices
    assert all(c.chosen == max(c.running) and c.unchanged for c in record.choices)

    class Nobody(VllmPaperScheduler):
        def choose_victim(self, needy):
            return None

    (record,) = probe_runs(Nobody, "choose_victim", [CASE])
    assert [c.chosen for c in record.choices] == [None]
    assert record.error == "the run stopped at a choice it cannot go on from"

    class Shuffles(VllmPaperScheduler):
        def choose_victim(self, needy):
            got = super().choose_victim(needy)
            self.running.reverse()
            return got

    (record,) = probe_runs(Shuffles, "choose_victim", [CASE])
    assert record.choices[-1].unchanged is False and record.error is not None


def test_each_recovery_is_recorded_with_what_decides_it():
    # Costs exact in binary (the hidden test's): a tie at 0.5 s a token goes to recomputing.
    copy = (8, 2, 64.0, 0.25)
    for per_token, swaps in [(0.5, 0), (0.5 + 2**-10, 1)]:
        case = (ROWS, (4, "cheaper", None, copy), 24, (1.0, 0.0, per_token))
        (record,) = probe_runs(VllmPaperScheduler, "recover", [case])
        assert record.error is None and record.counter("swap_outs") == swaps
        (decision,) = record.recoveries
        assert (decision.tokens, decision.blocks, decision.room) == (6, 2, True)
        assert decision.round_trip_s == 3.0 and decision.recompute_s == 6 * per_token
        assert decision.swapped == bool(swaps) and decision.new != decision.swapped


def test_the_students_error_ends_its_case_and_is_recorded():
    class Broken(VllmPaperScheduler):
        def preempt(self, victim):
            raise ValueError("not written yet")

    records = probe_runs(Broken, "preempt", [CASE, CASE])
    assert [r.error for r in records] == ["ValueError: not written yet"] * 2
    with pytest.raises(ValueError, match="tested must be"):
        probe_runs(Broken, "everything", [CASE])


def test_on_a_private_copy_the_class_runs_on_the_copys_loop_and_gets_its_base_back(monkeypatch):
    copy = fresh_copy("kvcourse.serving", "kvcourse.workloads")
    serving, workloads = copy["kvcourse.serving"], copy["kvcourse.workloads"]

    class Below(Written):
        pass

    assert subclasses_directly(Written) and not subclasses_directly(Below)

    (mine,) = probe_runs(VllmPaperScheduler, "all", [CASE], steps=True)

    def broken(self):
        raise RuntimeError("the kernel's loop, rewritten")

    monkeypatch.setattr(IterationScheduler, "step", broken)
    (record,) = probe_runs(Written, "all", [CASE], steps=True, serving=serving, workloads=workloads)
    assert record.error is None and Written.__bases__ == (IterationScheduler,)
    assert record.steps == mine.steps and record.counters == mine.counters
    with pytest.raises(TypeError, match="directly"):
        probe_runs(Below, "all", [CASE], serving=serving, workloads=workloads)


def test_a_run_past_its_limit_ends_with_an_error():
    (record,) = probe_runs(VllmPaperScheduler, "all", [CASE], max_iterations=3)
    assert record.counter("iterations") == 3
    assert record.error == "no end in sight after 3 iterations"
