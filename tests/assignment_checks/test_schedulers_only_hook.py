"""only_hook (kvcourse.assignment_checks.schedulers): the student's scheduler with one of its own
hooks and the library's others, as a4's visible cells run it. Fast, no notebooks. (The module's
other helpers are tested in test_schedulers.py.)"""

from __future__ import annotations

import pytest

from kvcourse.assignment_checks.schedulers import HOOKS, only_hook, serve
from kvcourse.serving import IterationCost, PagedScheme, VllmPaperScheduler
from kvcourse.viz import PREEMPTION_DEMO

UNIT = IterationCost(1.0, 0.0, 0.0)


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
