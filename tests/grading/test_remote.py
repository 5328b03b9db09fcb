"""Hidden tests that run in the grader (kvcourse_grader.remote) against a snapshot of a kernel
(kvcourse_grader.snapshot_server): what crosses the channel and how, what the student's code
sees, and that nothing of a test reaches the process the student's code runs in."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from kvcourse_grader import hidden_runs, remote, snapshots
from kvcourse_grader.snapshot_server import ChannelError, decode, encode

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="fork and Unix sockets"
)

STUDENT = textwrap.dedent(
    """
    import sys

    import kvcourse.blocks

    SEEN = []  # what the student's code saw of its callers


    def area(width, height):
        if width < 0:
            raise ValueError(f"width {width} is negative")
        return width * height


    def grows(items):
        items.append(99)
        return len(items)


    class Bag:
        def __init__(self):
            self.items = []

        def add(self, item):
            self.items.append(item)
            return self

        def __len__(self):
            return len(self.items)

        def __contains__(self, item):
            return item in self.items


    KEPT = [1, 2]


    def kept():
        return KEPT


    def total(arena):
        return arena.free_slots() + len(arena.free_blocks())


    from kvcourse.cluster import ClusterView, Decision

    VIEW = ClusterView(100, (0.5, 0.0), (0, 1))


    def first_idle(view):
        return Decision(view.queue_s.index(0.0), 0, None, 1.25)


    class Node:
        def __init__(self, tokens):
            self.tokens, self.children = tokens, {}


    class Tree:
        def __init__(self):
            self.root = Node(())


    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__


    def lies():
        return Liar(5)


    class Oops(ValueError):
        pass


    def oops():
        raise Oops("my own kind of ValueError")


    def leaves():
        raise SystemExit(3)


    def spy(x):
        frame = sys._getframe(1)
        while frame is not None:
            SEEN.append(repr(frame.f_code.co_consts) + repr(dict(frame.f_locals)))
            frame = frame.f_back
        print("spying", x)
        return x


    def cheat(tokens, size):
        return kvcourse.blocks.chained_block_hashes(tokens, size)


    def out_of_blocks():
        raise kvcourse.blocks.OutOfBlocksError("no free block")


    class Holder:  # keeps the blocks it takes from a pool it is handed
        def __init__(self, pool):
            self.pool, self.mine = pool, []

        def take(self, count):
            self.mine += self.pool.allocate_many(count)
            return list(self.mine)

    def numpy_values():
        import numpy as np

        return np.int64(7), np.arange(3, dtype=np.float32)
    """
)


@pytest.fixture
def snapshot(tmp_path):
    """Run hidden-cell source against a snapshot of a Python process that ran ``STUDENT``; returns
    ``run(source) -> outputs`` and ``spied() -> what the parent process's SEEN holds``."""
    listener = snapshots.SnapshotListener(tmp_path)
    processes = []

    def run(
        source: str, student: str = STUDENT, in_snapshot: bool = False, seed: str = ""
    ) -> list[dict]:
        nonce = f"n{len(processes)}"
        code = student + "\n" + snapshots.snapshot_code(listener.kernel_path, nonce, 30, 60)
        code += "\nimport sys\nsys.stdin.read()\nprint('|'.join(SEEN) if 'SEEN' in dir() else '')\n"
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(process)
        conn = listener.accept(nonce, 20)
        assert conn is not None, "the snapshot never called in"
        channel = remote.Channel(conn, time.monotonic() + 30)
        if in_snapshot:
            return hidden_runs.run_in_snapshot(source, channel, 1, "CellNotRun")
        return hidden_runs.run_hidden_cell(source, channel, {}, 1, "CellNotRun", case_seed=seed)

    def parent_output() -> str:
        out, _ = processes[-1].communicate("", timeout=30)
        return out

    yield run, parent_output
    for process in processes:
        process.kill()
    listener.close()


def errors(outputs: list[dict]) -> list[tuple[str, str]]:
    return [(o["ename"], o["evalue"]) for o in outputs if o["output_type"] == "error"]


def test_values_cross_as_data_and_objects_as_handles():
    handles = []

    def handle_of(value):
        handles.append(value)
        return {"t": "h", "v": len(handles), "n": type(value).__name__}

    class Mine(int):
        pass

    value = {"a": [1, 2.5, None, True], (1, "x"): {3, 4}, "b": b"\x00\xff", "n": frozenset([1])}
    assert decode(encode(value, handle_of), None) == value
    assert decode(encode(np.int64(3), handle_of), None).dtype == np.int64
    array = decode(encode(np.eye(2, dtype=np.float32), handle_of), None)
    assert array.dtype == np.float32 and array.shape == (2, 2)
    assert encode(Mine(3), handle_of)["t"] == "h"  # a subclass may redefine ==: never data
    assert encode([Mine(1)], handle_of)["v"][0]["t"] == "h"
    with pytest.raises(ChannelError):
        decode({"t": "pickle", "v": "..."}, None)


def test_the_students_functions_objects_and_errors(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import numbers
from kvcourse.assignment_checks.harness import calls_on, checking, contained, each

assert area(3, 4) == 12
try:
    area(-1, 2)
except ValueError as err:
    assert "negative" in str(err)
else:
    raise AssertionError("no ValueError")
try:
    oops()
except ValueError as err:  # the student's subclass of ValueError
    assert type(err).__name__ == "Oops"
try:
    leaves()
except Exception as err:  # SystemExit may not end the grader
    assert type(err).__name__ == "SystemExit"
items = [1, 2]
assert grows(items) == 3 and items == [1, 2, 99]  # the caller's list, as the call left it
bag = Bag().add(5).add(6)
assert len(bag) == 2 and 5 in bag and 7 not in bag and bag.items == [5, 6]
assert bag.add(1) is bag  # one proxy per object
assert each(area, [(1, 2), (3, 4)]) == [2, 12]
assert contained(bag, [5, 7, 1]) == [True, False, True]
made, error = calls_on(bag, [("add", (8,)), ("add", (9,))], after=["len", ("in", [8, 9])])
readings = [readings for _, readings in made]
assert error is None and readings == [[4, [True, False]], [5, [True, True]]]
made, error = calls_on(bag, [("add", (1,)), ("nothing", ())], after=["len"])
assert len(made) == 1 and type(error).__name__ == "AttributeError"
assert lies() != 5  # an object that claims to equal everything is compared by identity
from kvcourse.blocks import OutOfBlocksError

try:
    out_of_blocks()
except OutOfBlocksError as err:  # the library's own class, here as in the kernel
    assert "no free block" in str(err)
scalar, array = numpy_values()
assert isinstance(scalar, numbers.Integral) and array.tolist() == [0.0, 1.0, 2.0]
print("all good")
"""
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_readings_attach_stand_ins_and_calls_on_results_happen_in_the_snapshot(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import kvcourse.blocks
from kvcourse.assignment_checks.harness import attach, calls_on_result, is_subclass, reading, stub

assert is_subclass(Tree, object) and not is_subclass(Tree, kvcourse.blocks.BuddyAllocator)
tree = Tree()
attach(tree.root, "children", 4, Node((4, 5)))
attach(tree.root.children[4], "children", 6, Node((6,)))
assert reading(tree, ("tree", "root", "children", ("tokens",))) == [(4, [(4, 5)]), (6, [(6,)])]
assert calls_on_result(kept, (), [("append", (3,)), ("reverse", ())]) == 2
assert kept() == [3, 2, 1]  # the student's own list changed, where the student keeps it
arena = stub({"free_slots": 8, "free_blocks": [(0, 8)]}, refuse=("alloc",))
assert total(arena) == 9
print("all good")
"""
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_a_library_object_made_in_the_snapshot_for_the_students_code(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import kvcourse.blocks
from kvcourse.assignment_checks.harness import calls_on_reading, kernel_object, reading

pool = kernel_object(kvcourse.blocks.BlockPool, 6, 4, taken=[1])
holder = Holder(pool)
assert [int(b) for b in holder.take(2)] == [0, 2]
assert calls_on_reading(holder, "mine", [("append", (5,)), ("nothing", ()), ("clear", ())]) == 1
assert calls_on_reading(holder, ("call", "take", (0,)), [("clear", ())]) == 1
assert reading(holder, "mine") == [0, 2, 5]  # the student's own list changed, in the snapshot
after = reading(pool, ["num_free", ("call", "ref_count", (0,)), ("call", "free_block_ids")])
assert after == [3, 1, (3, 4, 5)], after
both = reading(holder, ["mine", ("of", pool, ("call", "ref_counts"))])
assert both == [[0, 2, 5], (1, 1, 1, 0, 0, 0)], both
try:
    holder.take(9)
except kvcourse.blocks.OutOfBlocksError:
    pass
else:
    raise AssertionError("the pool lent more blocks than it has")
try:
    kernel_object(dict)
except TypeError as err:
    assert "course library's classes" in str(err)
print("all good")
"""
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_the_librarys_records_cross_as_values_and_its_classes_are_the_graders(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import kvcourse.cluster

assert ClusterView is kvcourse.cluster.ClusterView  # looked up: the grader's own class
assert VIEW == ClusterView(100, (0.5, 0.0), (0, 1))  # a frozen dataclass crosses as its fields
got = first_idle(ClusterView(10, (1.0, 0.0, 0.0), (0, 0, 0)))
assert isinstance(got, Decision) and got == Decision(1, 0, None, 1.25)
print("all good")
"""
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_a_failed_check_names_its_property_and_the_reference_is_switched_off(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import sys

import kvcourse.blocks
from kvcourse.assignment_checks.harness import checking, switched_off

HASHING = sys.modules[kvcourse.blocks.chained_block_hashes.__module__]
with checking("your own hashes"), switched_off(HASHING, reference="hashing", watch=True):
    cheat([1, 2, 3, 4], 2)
"""
    )
    assert errors(outputs) == [("PropertyFailed", "your own hashes")]
    assert "your code called the course library's hashing" in "".join(outputs[-1]["traceback"])


def test_the_tests_values_never_reach_the_students_process(snapshot):
    run, parent_output = snapshot
    outputs = run(
        """
SECRET_EXPECTED = 918273645
answer = spy(1)
assert answer == 1, SECRET_EXPECTED
"""
    )
    assert errors(outputs) == []
    # The student's function walked every frame above it, in the snapshot: the server's. The
    # parent (the kernel the notebook goes on in) saw none of it either.
    assert "918273645" not in parent_output()


def test_a_test_cannot_hand_its_own_objects_to_the_student(snapshot):
    run, _ = snapshot
    outputs = run("area(lambda: 0, 2)")
    assert errors(outputs)[0][0] == "TypeError"
    assert "only plain data" in errors(outputs)[0][1]


def test_a_lost_snapshot_is_not_run(snapshot):
    run, _ = snapshot
    outputs = run(
        "import os\narea(1, 2)\n",
        student=STUDENT + "\nimport os\narea = lambda w, h: os._exit(1)\n",
    )
    assert errors(outputs)[0][0] == "CellNotRun"


def test_random_cases_draw_from_the_grading_runs_seed(snapshot):
    """A cell in the grader gets ``fixed`` mixed with the run's seed (the cases by hand without
    one); the library's own ``case_seed`` is the by-hand one."""
    from kvcourse.assignment_checks.harness import case_seed

    run, _ = snapshot
    source = "from kvcourse.assignment_checks.harness import case_seed\nprint(case_seed(7))\n"
    assert run(source, seed="424242")[0]["text"] == "7/424242\n"
    assert run(source)[0]["text"] == f"{case_seed(7)}\n" == "7/by hand\n"


def test_runs_in_grader_reads_the_marker():
    assert hidden_runs.runs_in_grader(f"### BEGIN HIDDEN TESTS\n{hidden_runs.GRADER_SIDE}\nx = 1\n")
    assert not hidden_runs.runs_in_grader("### BEGIN HIDDEN TESTS\nx = 1\n")


def test_a_hidden_cell_that_runs_in_its_snapshot(snapshot):
    run, parent_output = snapshot
    passing = "SECRET = 918273645\nassert spy(SECRET) == SECRET\nprint('quiet')\n"
    assert run(passing, in_snapshot=True) == []  # what it printed went nowhere
    # The student's function read the test's frame in the snapshot; the kernel never saw it.
    assert "918273645" not in parent_output()
    failing = (
        "from kvcourse.assignment_checks.harness import checking\n"
        'with checking("areas of other shapes"):\n    assert area(2, 2) == 5\n'
    )
    assert errors(run(failing, in_snapshot=True)) == [("PropertyFailed", "areas of other shapes")]
    warned = run("import sys\nsys.stderr.write('careful')\n", in_snapshot=True)
    assert warned == [{"output_type": "stream", "name": "stderr", "text": "careful"}]


TAMPERED = (
    STUDENT
    + """
import kvcourse.blocks.buddy

kvcourse.blocks.buddy.binary_decomposition = lambda n: [(0, n)]  # the kernel's library changed


def roots_of(decompose, num_slots):  # the student's code, handed a function of the copy
    return decompose(num_slots)


def kernel_roots(num_slots):
    return kvcourse.blocks.buddy.binary_decomposition(num_slots)
"""
)


def test_a_simulator_copied_in_the_snapshot_runs_there_and_only_its_results_cross(snapshot):
    run, _ = snapshot
    outputs = run(
        """
from kvcourse.assignment_checks.harness import kernel_copy, kept

copy = kernel_copy("kvcourse.blocks")
buddy = copy["kvcourse.blocks.buddy"]
assert type(buddy).__name__ == "Proxy", type(buddy)  # a module of the snapshot, by handle
assert buddy.binary_decomposition(12) == [(0, 8), (8, 4)]  # the copy is as its source says
assert roots_of(buddy.binary_decomposition, 12) == [(0, 8), (8, 4)]
assert kernel_roots(12) == [(0, 12)]  # the kernel's own library, as the student left it
pool = kept(copy.blocks.BlockPool, 6, 4)
assert type(pool).__name__ == "Proxy" and pool.num_free == 6
assert kept(len, [1, 2]) == 2  # a function of the grader's own is just called
try:
    kernel_copy("os")
except Exception as err:
    assert "course library" in str(err), err
else:
    raise AssertionError("copied a module outside the course library")
print("all good")
""",
        student=TAMPERED,
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_tensors_cross_as_their_values_and_a_subclass_as_a_handle():
    import torch

    handles = []

    def handle_of(value):
        handles.append(value)
        return {"t": "h", "v": len(handles), "n": type(value).__name__}

    odd = torch.tensor([[0.1, -0.0], [float("nan"), float("inf")]], dtype=torch.float64)
    back = decode(encode(odd, handle_of), None)
    assert back.dtype == torch.float64 and back.shape == (2, 2)
    assert torch.allclose(back, odd, rtol=0, atol=0, equal_nan=True)
    assert str(back[0, 1].item()) == "-0.0"  # the sign of zero crosses too
    for tensor in [
        torch.arange(6, dtype=torch.int64).reshape(3, 2, 1),
        torch.tensor(2.5, dtype=torch.float32),
        torch.tensor([True, False]),
        torch.zeros(0, 4, dtype=torch.float16),
    ]:
        back = decode(encode(tensor, handle_of), None)
        assert back.dtype == tensor.dtype and torch.equal(back, tensor)

    class Mine(torch.Tensor):
        pass

    assert encode(torch.zeros(2).as_subclass(Mine), handle_of)["t"] == "h"
    assert encode(torch.zeros(2, dtype=torch.complex64), handle_of)["t"] == "h"
    with pytest.raises(ChannelError):
        decode({"t": "pt", "d": "complex64", "s": [1], "v": ""}, None)
    with pytest.raises(ChannelError):  # three bytes are no float64
        decode({"t": "pt", "d": "float64", "s": [1], "v": "AAAA"}, None)


TENSORS = (
    STUDENT
    + """
import torch


def scaled(x, factor):
    return x * factor, x.sum()


def scales_in_place(x, factor):
    x.mul_(factor)
    return None
"""
)


def test_a_students_function_of_tensors_and_what_it_did_to_them(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import torch

x = torch.tensor([1.0, 2.0, float("nan")], dtype=torch.float64)
product, total = scaled(x, 3.0)
assert type(product) is torch.Tensor and product.dtype == torch.float64
assert torch.allclose(product, x * 3, equal_nan=True) and torch.isnan(total)
assert torch.equal(x[:2], torch.tensor([1.0, 2.0], dtype=torch.float64))  # left as it was
scales_in_place(x, 2.0)  # changed in the snapshot: the test's own tensor is changed too
assert torch.equal(x[:2], torch.tensor([2.0, 4.0], dtype=torch.float64)), x
print("all good")
""",
        student=TENSORS,
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


ATTENTION = (
    STUDENT
    + '''
import math

import torch


def online_softmax_update(*state):
    raise NotImplementedError  # the tests' own step stands in for it


def blockwise(scores, values, table, block):
    """Folds the keys in blocks of ``block``; reads the blocks of ``table`` all at once first."""
    values[list(table)]
    heads = scores.shape[0]
    state = (
        torch.full((heads,), -math.inf, dtype=torch.float64),
        torch.zeros(heads, dtype=torch.float64),
        torch.zeros(heads, values.shape[-1], dtype=torch.float64),
    )
    for i in range(0, scores.shape[1], block):
        state = online_softmax_update(*state, scores[:, i : i + block], values[:, i : i + block])
    table.append(-1)
    return state[2] / state[1][:, None]
'''
)


def test_a_students_attention_runs_under_the_tests_step_in_the_snapshot(snapshot):
    run, _ = snapshot
    outputs = run(
        """
import torch
from kvcourse.assignment_checks.harness import stand_in_calls

gen = torch.Generator().manual_seed(0)
scores = torch.randn(2, 6, generator=gen, dtype=torch.float64)
values = torch.randn(2, 6, 3, generator=gen, dtype=torch.float64)
expected = torch.einsum("hl,hld->hd", torch.softmax(scores, dim=-1), values)
table = [0, 1]
call = ((scores, values, table, 4), {}, (1,))
((got, keys, gathers, unchanged),) = stand_in_calls(blockwise, [call])
assert type(got) is torch.Tensor and float((got - expected).abs().max()) < 1e-12
assert keys == [4, 2] and gathers == [(2, 6, 3)]
assert unchanged is False and table == [0, 1]  # the snapshot's copy of the table was changed
print("all good")
""",
        student=ATTENTION,
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"


def test_each_call_may_carry_its_own_readings(snapshot):
    run, _ = snapshot
    outputs = run(
        """
from kvcourse.assignment_checks.harness import calls_on

bag = Bag()
made, error = calls_on(bag, [("add", (1,)), ("add", (2,), ["len", ("in", [2, 3])])], [("in", [1])])
assert error is None and [readings for _, readings in made] == [[[True]], [2, [True, False]]], made
print("all good")
"""
    )
    assert errors(outputs) == []
    assert outputs[0]["text"] == "all good\n"
