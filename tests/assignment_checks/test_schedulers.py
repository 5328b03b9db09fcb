"""The visible-cell helpers of assignment a4 (kvcourse.assignment_checks)."""

from __future__ import annotations

import pytest

from kvcourse.assignment_checks import letters, name_of, progress, serve
from kvcourse.assignment_checks.schedulers import HOOKS, only_hook
from kvcourse.serving import IterationCost, PagedScheme, PreemptEarliest, VllmPaperScheduler
from kvcourse.viz import PREEMPTION_DEMO
from kvcourse.workloads import Request, sharegpt_like

UNIT = IterationCost(1.0, 0.0, 0.0)


def test_serve_reads_the_section_6_example_as_letters():
    served = serve(
        VllmPaperScheduler, PREEMPTION_DEMO, PagedScheme(4), num_slots=24, cost=UNIT, hint="h"
    )
    assert len(served.steps) == 11
    step = served.step(4)
    assert (step.iteration, step.preempted, step.waiting, step.admitted) == (4, "C", "CD", "")
    assert [served.when("admitted", n) for n in "ABCD"] == [[1], [1], [2, 7], [9]]
    assert served.counters["preemptions"] == 1 and served.counters["recomputed_tokens"] == 6
    assert served.preempted_per_request == (0, 0, 1, 0)
    assert served.end_s == 11.0 and served.swap_s == 0.0


class Broken(VllmPaperScheduler):
    def preempt(self, victim):
        self.running.remove(victim)  # and nothing else


def test_an_error_in_the_run_names_the_iteration_and_gives_the_hint():
    with pytest.raises(AssertionError, match=r"iteration 4 raised PreemptionError: .*Hint: look"):
        serve(Broken, PREEMPTION_DEMO, PagedScheme(4), num_slots=24, cost=UNIT, hint="look")
    with pytest.raises(AssertionError, match=r"iteration \d+ raised PreemptionError.*Hint: look"):
        progress(Broken, PREEMPTION_DEMO, PagedScheme(4), num_slots=24, cost=UNIT, hint="look")


def test_serve_stops_a_run_that_does_not_end():
    requests = [Request(0, 0.0, 2, 50)]
    with pytest.raises(AssertionError, match="did not finish in 10 iterations. Hint: h"):
        serve(
            VllmPaperScheduler,
            requests,
            PagedScheme(4),
            num_slots=64,
            cost=UNIT,
            hint="h",
            max_iterations=10,
        )


def test_progress_counts_what_exercise_12_is_about():
    requests = sharegpt_like(150, rate=8.0, seed=0)
    vllm = progress(VllmPaperScheduler, requests, PagedScheme(16), num_slots=2560, hint="h")
    assert vllm.finished == 150 and vllm.oldest_preempted == 0
    assert vllm.counters["preemptions"] > 0
    earliest = progress(PreemptEarliest, requests, PagedScheme(16), num_slots=2560, hint="h")
    assert earliest.oldest_preempted > 0


def test_names_are_letters_in_arrival_order():
    run = VllmPaperScheduler(PREEMPTION_DEMO, PagedScheme(4), num_slots=24, cost=UNIT)
    run.step()
    assert letters(run.running) == "AB"
    assert name_of(run.running[1]) == "B"
    assert "not a running request" in name_of(None)


# ------------------------------------------------------------------------------------ only_hook
class Student(VllmPaperScheduler):
    """A student's class: every hook its own (here: vLLM's, wrapped, so they can be told apart)."""

    def choose_victim(self, needy):
        return VllmPaperScheduler.choose_victim(self, needy)

    def preempt(self, victim):
        VllmPaperScheduler.preempt(self, victim)

    def recover(self, victim):
        VllmPaperScheduler.recover(self, victim)


@pytest.mark.parametrize("hook", HOOKS)
def test_only_the_named_hook_is_the_students(hook):
    cls = only_hook(Student, hook, library=VllmPaperScheduler)
    assert issubclass(cls, Student) and cls.__name__.startswith("Your")
    for name in HOOKS:
        expected = vars(Student)[name] if name == hook else vars(VllmPaperScheduler)[name]
        assert getattr(cls, name) is expected, name


def test_the_mixed_class_serves_as_the_students_would():
    cls = only_hook(Student, "preempt", library=VllmPaperScheduler)
    served = serve(cls, PREEMPTION_DEMO, PagedScheme(4), num_slots=24, cost=UNIT, hint="h")
    assert served.step(4).preempted == "C" and len(served.steps) == 11


def test_an_unknown_hook_is_refused():
    with pytest.raises(ValueError, match="hook must be one of"):
        only_hook(Student, "admit", library=VllmPaperScheduler)
