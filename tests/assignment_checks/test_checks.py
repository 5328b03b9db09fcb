"""kvcourse.assignment_checks: the harness (as the kernel imports it, and as the private copy the
grader compiles for hidden cells) and the helpers of the visible test cells; fast unit tests, no
notebooks."""

from __future__ import annotations

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

import kvcourse
import kvcourse.sizing
from kvcourse import assignment_checks as checks
from kvcourse.assignment_checks import harness
from kvcourse.specs import OPT_13B


def private_harness() -> types.ModuleType:
    """The harness as hidden cells get it at autograde: its source file compiled into a fresh
    module that no registry holds (kvcourse_grader.hidden_harness does the same in the kernel)."""
    module = types.ModuleType("kvcourse_private_harness")
    source = Path(harness.__file__).read_text(encoding="utf-8")
    exec(compile(source, harness.__file__, "exec", dont_inherit=True), vars(module))
    return module


FRESH_COPIES = [pytest.param(checks.fresh_copy, id="library"), pytest.param(None, id="private")]


def fake_library_module(name: str = "kvcourse.fake_for_checks") -> types.ModuleType:
    """A module that looks like part of the library: a function, a class, a property."""
    module = types.ModuleType(name)
    exec(
        "def twice(x):\n    return 2 * x\n\n"
        "class Thing:\n"
        "    def value(self):\n        return 1\n"
        "    @property\n    def size(self):\n        return 3\n\n"
        "def __getattr__(name):\n    raise AttributeError(name)\n",
        vars(module),
    )
    return module


# ----------------------------------------------------------------------------------- switched_off
def test_switched_off_refuses_while_the_block_runs():
    fake = fake_library_module()
    with checks.switched_off(fake, fake.Thing, reference="fake (kvcourse.fake)"):
        for call in (
            lambda: fake.twice(2),
            lambda: fake.Thing().value(),
            lambda: fake.Thing().size,
        ):
            with pytest.raises(AssertionError) as caught:
                call()
            assert str(caught.value) == (
                "your code called the course library's fake (kvcourse.fake), which this test "
                "switches off: write it yourself"
            )
        with pytest.raises(AttributeError):  # the module's __getattr__ keeps working
            fake.missing  # noqa: B018
    assert fake.twice(2) == 4 and fake.Thing().value() == 1 and fake.Thing().size == 3


def test_switched_off_restores_after_a_failure_and_skips_the_rest():
    fake = fake_library_module()
    outside = types.FunctionType(fake.twice.__code__, {}, "outside")  # not a library function
    with pytest.raises(ZeroDivisionError):
        with checks.switched_off(fake, reference="x"):
            1 / 0  # noqa: B018
    assert fake.twice(3) == 6
    with checks.switched_off(outside, reference="x"):
        assert outside(2) == 4
    other = fake_library_module("kvcourse.other_for_checks")
    fake.imported = other.twice  # imported into the module, defined elsewhere: left alone
    with checks.switched_off(fake, reference="x"):
        assert fake.imported(1) == 2
    package, below = (
        types.ModuleType("kvcourse.fake_package"),
        fake_library_module("kvcourse.fake_package.part"),
    )
    package.twice = below.twice  # a package re-exports what its modules define: switched off
    with checks.switched_off(package, reference="x"):
        with pytest.raises(AssertionError):
            below.twice(1)


def test_switched_off_watch_switches_copies_off_and_notices_code_given_back():
    fake = fake_library_module()
    original = fake.twice.__code__
    copy = types.FunctionType(original, vars(fake), "twice")  # a copy made before
    nested = {}
    exec("def outer(x):\n    def twice(x):\n        return 2 * x\n    return twice(x)\n", nested)
    nested["outer"].__code__ = nested["outer"].__code__.replace(  # holds the very code, nested
        co_consts=tuple(original if isinstance(c, types.CodeType) else c
                        for c in nested["outer"].__code__.co_consts)
    )  # fmt: skip
    for made_before in (copy, nested["outer"]):
        with pytest.raises(AssertionError, match=r"a copy of it \(twice\), which the tests"):
            with checks.switched_off(fake, reference="x", watch=True):
                made_before(2)
        assert made_before(2) == 4  # itself again once the block has ended
    with pytest.raises(AssertionError, match=r"a copy of it \(late\), which the tests"):
        with checks.switched_off(fake, reference="x", watch=True):
            late = types.FunctionType(original, vars(fake), "late")  # made inside: runs,
            assert late(2) == 4  # but is noticed when the block ends
    with pytest.raises(AssertionError, match="and turned off the check for it"):
        with checks.switched_off(fake, reference="x", watch=True):
            fake.twice.__code__ = original
            assert fake.twice(2) == 4
    with pytest.raises(AssertionError, match="the tests switch off: write it yourself"):
        with checks.switched_off(fake, reference="x", watch=True):
            fake.twice(1)
    assert sys.getprofile() is None and sys.gettrace() is None and fake.twice(2) == 4
    with checks.switched_off(fake, reference="x", watch=True):
        pass  # nothing called: nothing to say


def test_switched_off_watch_adds_nothing_to_each_call_and_searches_the_references_globals():
    """The library's own calls inside the block cost the watch nothing (no profiler, no audit
    event: a grader's audit hook would see millions), and a copy in the reference's own module's
    globals, or in globals that only claim a library module's name, is still switched off."""
    fake = fake_library_module()
    events: list[str] = []
    sys.addaudithook(lambda event, args: events.append(event) if listening else None)
    listening = True
    with checks.switched_off(fake, reference="x", watch=True):
        kvcourse.sizing.kv_bytes_per_token(OPT_13B)
        del events[:]
        for _ in range(50):
            kvcourse.sizing.kv_bytes_per_token(OPT_13B)
        seen = list(events)
    listening = False
    assert "object.__getattr__" not in seen and "builtins.id" not in seen, seen
    # A copy of the reference made with the reference's own module's globals is still noticed.
    saved = kvcourse.sizing.kv_bytes_per_token
    twin = types.FunctionType(saved.__code__, saved.__globals__, "twin", saved.__defaults__)
    with pytest.raises(AssertionError, match=r"a copy of it \(kv_bytes_per_token\)"):
        with checks.switched_off(saved, reference="x", watch=True):
            twin(OPT_13B)
    posing = {"__name__": "kvcourse.sizing"}  # a cell's globals renamed after a library module
    posed = types.FunctionType(fake.twice.__code__, posing, "twice")
    with pytest.raises(AssertionError, match=r"a copy of it \(twice\)"):
        with checks.switched_off(fake, reference="x", watch=True):
            posed(2)


LONG_REFERENCE = """
def spread(counts, total):
    \"\"\"Share ``total`` out in proportion to ``counts``, largest remainders first.\"\"\"
    whole = sum(counts)
    shares = [total * c // whole for c in counts]
    left = total - sum(shares)
    order = sorted(range(len(counts)), key=lambda i: -(total * counts[i] % whole))
    for i in order[:left]:
        shares[i] += 1
    return shares
"""


@pytest.mark.parametrize(
    "make_harness", [lambda: harness, private_harness], ids=["library", "private"]
)
def test_switched_off_watch_knows_a_pasted_or_retyped_reference(make_harness):
    """A copy of the reference compiled from its source at other lines, in another file, under
    another name or with other local names is a copy; a short function written alike is not, nor
    is code that differs."""
    watched = make_harness()
    fake = types.ModuleType("kvcourse.fake_for_checks")
    exec(compile(LONG_REFERENCE, "kvcourse/fake.py", "exec"), vars(fake))
    fake.spread.__module__ = fake.__name__
    short = fake_library_module()
    pasted = "\n" * 40 + LONG_REFERENCE.replace("def spread", "def my_spread")
    retyped = (
        LONG_REFERENCE.replace("shares", "parts")
        .replace("whole", "n")
        .replace("left", "extra")
        .replace("Share ``total``", "Split total")
    )
    different = LONG_REFERENCE.replace("-(total", "(total")
    for source, name, copied in [
        (pasted, "my_spread", True),
        (retyped, "spread", True),
        (different, "spread", False),
    ]:
        cell = {}
        exec(compile(source, "<ipython-input-7>", "exec"), cell)
        assert cell[name]([1, 2], 6) == ([2, 4] if copied else cell[name]([1, 2], 6))
        if copied:
            with pytest.raises(AssertionError, match=rf"a copy of it \({name}\)"):
                with watched.switched_off(fake, reference="x", watch=True):
                    cell[name]([1, 2], 6)
        else:
            with watched.switched_off(fake, reference="x", watch=True):
                cell[name]([1, 2], 6)
    mine = {}
    exec("\n\ndef twice(x):\n    return 2 * x\n", mine)  # short, written alike elsewhere
    with watched.switched_off(short, reference="x", watch=True):
        assert mine["twice"](2) == 4
    assert watched.code_fingerprint(fake.spread.__code__) == watched.code_fingerprint(
        types.FunctionType(fake.spread.__code__.replace(co_firstlineno=99), {}).__code__
    )


def test_a_copy_compiled_one_statement_at_a_time_is_a_copy():
    """IPython compiles a cell one statement at a time, so a pasted ``module.function(...)``
    call compiles to other instructions (LOAD_METHOD) than in the library's file (LOAD_ATTR),
    and its jumps move: still a copy."""
    source = (
        "import bisect\n\n\ndef place(xs, x, limit):\n"
        "    if len(xs) >= limit:\n        xs.pop(0)\n"
        "    else:\n        x = x + 1\n"
        "    bisect.insort(xs, x)\n    return [v for v in xs if v != x] + [len(xs)]\n"
    )
    fake = types.ModuleType("kvcourse.fake_for_checks")
    exec(compile(source, "kvcourse/fake.py", "exec"), vars(fake))
    cell: dict = {}
    for statement in ast.parse(source).body:  # as IPython runs a cell
        exec(compile(ast.Module([statement], []), "<cell>", "exec"), cell)
    assert cell["place"].__code__.co_code != fake.place.__code__.co_code
    with pytest.raises(AssertionError, match=r"a copy of it \(place\)"):
        with harness.switched_off(fake, reference="x", watch=True):
            cell["place"]([1, 3], 2, 5)


# --------------------------------------------------------------------------------------- stand_in
STAND_INS = [
    pytest.param(lambda f: checks.stand_in(f, "online_softmax_update"), id="library"),
    pytest.param(None, id="private"),
]

WALK = """
import math

import torch


def walk(scores, values, block, restart=False, wide=False):
    # Folds the keys in blocks of ``block`` through online_softmax_update, as blockwise attention
    # does: scores [H, L], values [H, L, D]. ``restart`` starts every block from scratch (a bug).
    heads, length = scores.shape
    start = (
        torch.full((heads,), -math.inf, dtype=torch.float64),
        torch.zeros(heads, dtype=torch.float64),
        torch.zeros(heads, values.shape[-1], dtype=torch.float64),
    )
    state = start
    for i in range(0, length, block):
        chunk = slice(i, i + block)
        v = values[:, chunk].transpose(0, 1) if wide else values[:, chunk]
        state = online_softmax_update(*(start if restart else state), scores[:, chunk], v)
    return state[2] / state[1][:, None]
"""


@pytest.mark.parametrize("stand_in", STAND_INS)
def test_stand_in_counts_the_walk_and_computes_the_state(stand_in):
    import torch

    stand_in = stand_in or private_harness().stand_in
    namespace: dict = {"online_softmax_update": "the student's"}
    exec(WALK, namespace)
    walk = namespace["walk"]
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 10, generator=gen, dtype=torch.float64) * 30
    values = torch.randn(3, 10, 5, generator=gen, dtype=torch.float64)
    expected = torch.einsum("hl,hld->hd", torch.softmax(scores, dim=-1), values)
    with stand_in(walk) as keys:
        got = walk(scores, values, 4)
    assert keys == [4, 4, 2]
    assert float((got - expected).abs().max()) < 1e-12
    assert namespace["online_softmax_update"] == "the student's"  # put back
    with pytest.raises(AssertionError, match="not passed on|not the start state|call before"):
        with stand_in(walk):
            walk(scores, values, 4, restart=True)  # the state is not passed on
    with pytest.raises(AssertionError, match="values"):
        with stand_in(walk):
            walk(scores, values, 2, wide=True)  # values as [keys, H, D]
    del namespace["online_softmax_update"]
    with stand_in(walk) as keys:
        walk(scores, values, 10)
    assert keys == [10] and "online_softmax_update" not in namespace  # absent again


GATHERING = (
    WALK
    + """

def reads(scores, values, table, gather=False, mutate=False):
    if gather:
        values[list(table)]  # two blocks read at once: a copy of both
    if mutate:
        table.append(99)
    return walk(scores, values, 4)
"""
)


@pytest.mark.parametrize("private", [False, True], ids=["library", "private"])
def test_stand_in_calls_note_each_calls_steps_gathers_and_changes(private):
    import torch

    from kvcourse.assignment_checks.harness import stand_in_calls

    stand_in_calls = private_harness().stand_in_calls if private else stand_in_calls
    namespace: dict = {"online_softmax_update": "the student's"}
    exec(GATHERING, namespace)
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 10, generator=gen, dtype=torch.float64)
    values = torch.randn(3, 10, 5, generator=gen, dtype=torch.float64)
    expected = torch.einsum("hl,hld->hd", torch.softmax(scores, dim=-1), values)
    table = [0, 1]
    args = (scores, values, table)
    plain, gathered, mutated = stand_in_calls(
        namespace["reads"],
        [(args, {}, ()), (args, {"gather": True}, (1,)), (args, {"mutate": True}, ())],
    )
    got, keys, gathers, unchanged = plain
    assert keys == [4, 4, 2] and gathers == [] and unchanged
    assert float((got - expected).abs().max()) < 1e-12
    assert gathered[1:] == ([4, 4, 2], [(2, 10, 5)], True)  # the read of blocks 0 and 1 at once
    assert mutated[3] is False and table == [0, 1, 99]
    assert namespace["online_softmax_update"] == "the student's"  # put back


def test_module_of_finds_where_the_library_keeps_a_name():
    assert checks.module_of(kvcourse.sizing.kv_bytes_per_token) is kvcourse.sizing


# ------------------------------------------------------------------------------------- fresh_copy
@pytest.mark.parametrize("fresh_copy", FRESH_COPIES)
def test_fresh_copy_is_the_source_and_leaves_the_kernel_alone(fresh_copy, monkeypatch):
    fresh_copy = fresh_copy or private_harness().fresh_copy
    import kvcourse.serving
    import kvcourse.workloads

    monkeypatch.setattr(kvcourse.sizing, "kv_bytes_per_token", lambda *a, **k: 0)
    monkeypatch.setattr(kvcourse.serving, "simulate", "rewritten")
    modules, top = dict(sys.modules), dict(vars(kvcourse))
    copies = fresh_copy("kvcourse.serving", "kvcourse.workloads")
    assert dict(sys.modules) == modules and dict(vars(kvcourse)) == top
    serving, workloads = copies["kvcourse.serving"], copies["kvcourse.workloads"]
    assert serving is not kvcourse.serving and callable(serving.simulate)
    assert copies["kvcourse.sizing"].kv_bytes_per_token.__name__ == "kv_bytes_per_token"
    # Every module of the package is copied, and each copy uses the others.
    package = Path(kvcourse.__file__).parent / "serving"
    below = {f"kvcourse.serving.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    assert below <= set(copies)
    for name in below:
        assert sys.modules.get(name) is not copies[name]
    requests = workloads.sharegpt_like(20, rate=3.0, seed=0)
    assert isinstance(requests[0], workloads.Request)
    assert not isinstance(requests[0], kvcourse.workloads.Request)


@pytest.mark.parametrize("fresh_copy", FRESH_COPIES)
def test_fresh_copy_shares_what_it_is_told_to(fresh_copy):
    fresh_copy = fresh_copy or private_harness().fresh_copy
    import kvcourse.specs

    copies = fresh_copy("kvcourse.sizing", share=("kvcourse.specs",))
    assert "kvcourse.specs" not in copies
    assert copies["kvcourse.sizing"].ModelSpec is kvcourse.specs.ModelSpec
    alone = fresh_copy("kvcourse.sizing")
    assert alone["kvcourse.sizing"].ModelSpec is alone["kvcourse.specs"].ModelSpec
    assert alone["kvcourse.specs"].ModelSpec is not kvcourse.specs.ModelSpec


@pytest.mark.parametrize("fresh_copy", FRESH_COPIES)
@pytest.mark.parametrize("loaded", [True, False], ids=["loaded", "not-loaded"])
def test_fresh_copy_of_a_named_checks_module_leaves_its_package_alone(fresh_copy, loaded):
    """A module of kvcourse.assignment_checks (kept otherwise) is copied when named, and the
    kernel's package keeps its own (or none) under that name."""
    fresh_copy = fresh_copy or private_harness().fresh_copy
    import kvcourse.assignment_checks as package

    name = "kvcourse.assignment_checks.preemption_runs"
    if loaded:
        importlib.import_module(name)
    else:
        sys.modules.pop(name, None)
        vars(package).pop("preemption_runs", None)
    modules, attributes = dict(sys.modules), dict(vars(package))
    copies = fresh_copy(name)
    assert dict(sys.modules) == modules and dict(vars(package)) == attributes
    assert copies[name] is not sys.modules.get(name) and callable(copies[name].probe_runs)
    assert "kvcourse.assignment_checks.harness" not in copies  # the rest of the package is kept


@pytest.mark.parametrize("fresh_copy", FRESH_COPIES)
def test_fresh_copy_of_nothing_there_fails_and_cleans_up(fresh_copy):
    fresh_copy = fresh_copy or private_harness().fresh_copy
    modules = dict(sys.modules)
    meta_path = list(sys.meta_path)
    with pytest.raises(ModuleNotFoundError):
        fresh_copy("kvcourse.no_such_module")
    assert dict(sys.modules) == modules and sys.meta_path == meta_path


def test_fresh_copy_result_reads_by_name_and_by_attribute():
    copies = checks.fresh_copy("kvcourse.sizing")
    assert copies.sizing is copies["kvcourse.sizing"] and "kvcourse.specs" in copies
    assert copies.module_of(kvcourse.sizing.kv_bytes_per_token) is copies.sizing
    with pytest.raises(AttributeError, match="kvcourse.viz was not copied"):
        copies.viz  # noqa: B018


# ----------------------------------------------------------------------------------- plain values
class Anything(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


def test_as_int_and_friends_return_plain_values_or_say_what_came_back():
    assert type(checks.as_int(Anything(3), "f()")) is int
    with pytest.raises(AssertionError) as caught:
        checks.as_int(3.0, "f(1)", "use //.")
    assert str(caught.value) == "f(1): expected an int, got 3.0 of type float. Hint: use //."
    with pytest.raises(AssertionError, match="expected an int, got True of type bool."):
        checks.as_int(True, "f()")
    assert checks.as_float(1, "g()") == 1.0
    with pytest.raises(AssertionError, match=r"g\(\): expected a float, got '1' of type str."):
        checks.as_float("1", "g()")
    assert checks.as_int_or_none(None, "alloc(1)") is None
    with pytest.raises(AssertionError, match=r"alloc\(1\): expected an int or None, got 1.5"):
        checks.as_int_or_none(1.5, "alloc(1)")
    assert checks.as_int_list((Anything(1), 2), "ids") == [1, 2]
    with pytest.raises(AssertionError, match=r"ids: expected a list of int block ids, got \[1.0\]"):
        checks.as_int_list([1.0], "ids", "a list of int block ids")
    assert checks.as_int_pairs([(0, 4)], "roots") == [(0, 4)]
    for bad in ([[0, 4]], [(0, 4, 1)], "04", [(0, "4")]):
        with pytest.raises(AssertionError, match="expected a list of .offset, size. tuples of int"):
            checks.as_int_pairs(bad, "roots")


def test_expect_equal_and_expect_error_messages():
    checks.expect_equal([1], [1], "x", "none")
    with pytest.raises(AssertionError) as caught:
        checks.expect_equal((1, [2]), (1, [3]), "after free()", "look again.", label="(a, b) = ")
    assert str(caught.value) == (
        "after free(): expected (a, b) = (1, [3]), got (1, [2]). Hint: look again."
    )
    checks.expect_error(KeyError, lambda: {}["x"], "d['x']", "none")
    with pytest.raises(AssertionError) as caught:
        checks.expect_error(KeyError, lambda: None, "d['x']", "raise KeyError.")
    assert str(caught.value) == "d['x']: expected KeyError, but it returned. Hint: raise KeyError."
    with pytest.raises(ZeroDivisionError):  # another exception is the student's to see
        checks.expect_error(KeyError, lambda: 1 / 0, "d['x']", "none")


# --------------------------------------------------------------------- readers of the interfaces
class Arena:
    def __init__(self, blocks, free=None):
        self.blocks, self.free = blocks, free

    def free_blocks(self):
        return self.blocks

    def free_slots(self):
        return sum(s for _, s in self.blocks) if self.free is None else self.free


class Table:
    num_tokens, block_ids, wasted_slots = 9, (1, 4, 7), 3


class Manager:
    cow_count = 2

    def block_ids(self, seq_id):
        return [0, 1] if seq_id == "a" else [0, 2.0]

    def num_tokens(self, seq_id):
        return 7


def test_readers_of_the_interfaces():
    assert checks.arena_state(Arena([(4, 4), (8, 8)]), "s") == (12, [(4, 4), (8, 8)])
    with pytest.raises(AssertionError, match=r"^s: free_blocks\(\): expected a list of"):
        checks.arena_state(Arena([[4, 4]]), "s")
    with pytest.raises(AssertionError, match=r"^s: free_slots\(\): expected an int"):
        checks.arena_state(Arena([(4, 4)], free=4.0), "s")
    assert checks.table_state(Table(), "t") == (9, [1, 4, 7], 3)
    assert checks.manager_state(Manager(), "a", "m") == (7, [0, 1])
    assert checks.block_tables(Manager(), ["a", "a"], "m") == [[0, 1], [0, 1]]
    with pytest.raises(AssertionError, match=r"^m: block_ids\('b'\): expected a list of int"):
        checks.block_tables(Manager(), ["b"], "m")
    assert checks.cow_count(Manager(), "m") == 2


def test_each_contained_and_calls_on_in_the_kernel():
    from kvcourse.assignment_checks.harness import calls_on, contained, each

    assert each(max, [(1, 2), (5, 3)]) == [2, 5]
    assert contained({1, 2}, [2, 3]) == [True, False]
    items: list[int] = []
    made, error = calls_on(items, [("append", (4,)), ("append", (5,))], after=["len", ("in", [5])])
    assert error is None and made == [(None, [1, [False]]), (None, [2, [True]])]
    made, error = calls_on(items, [("pop", ()), ("pop", ()), ("pop", ())], after=["len"])
    assert [m[0] for m in made] == [5, 4] and isinstance(error, IndexError)
    with pytest.raises(ValueError, match="a reading is"):
        calls_on(items, [("append", (1,))], after=[3])


def test_calls_on_reads_each_state_as_it_was_right_after_its_call():
    """An object that hands out the list it keeps (and changes it later) is read as it was after
    each call; a call may carry its own readings."""
    from kvcourse.assignment_checks.harness import calls_on

    class Keeper:
        def __init__(self):
            self.mine = []

        def add(self, item):
            self.mine.append(item)
            return self.mine

        def table(self):
            return self.mine

    keeper = Keeper()
    calls = [("add", (1,)), ("add", (2,), [("call", "table"), "mine"])]
    made, error = calls_on(keeper, calls, after=[("call", "table")])
    assert error is None
    assert made == [([1], [[1]]), ([1, 2], [[1, 2], [1, 2]])]


class _Node:
    def __init__(self, tokens):
        self.tokens, self.children = tokens, {}


class _Tree:
    def __init__(self):
        self.root = _Node(())


def test_readings_of_a_tree_a_method_and_several_at_once_and_the_stand_ins():
    from kvcourse.assignment_checks.harness import (
        attach,
        calls_on_result,
        reading,
        stub,
    )

    tree = _Tree()
    attach(tree.root, "children", 5, _Node((5, 6)))
    attach(tree.root, "children", 2, _Node((2,)))
    attach(tree.root.children[5], "children", 7, _Node((7,)))
    # Children in key order, each parent before its own: what a test compares a tree by.
    rows = reading(tree, ("tree", "root", "children", ("tokens",)))
    assert rows == [(2, [(2,)]), (5, [(5, 6)]), (7, [(7,)])]
    assert reading([3, 1], [("call", "copy"), "len"]) == [[3, 1], 2]
    with pytest.raises(ValueError, match="a reading is"):
        reading(tree, [["len"]])
    kept = [[1, 2]]
    assert calls_on_result(lambda: kept[0], (), [("append", (3,)), ("reverse", ())]) == 2
    assert kept == [[3, 2, 1]]  # the calls changed the function's own list
    assert calls_on_result(tuple, ([1],), [("append", (3,))]) == 0  # a tuple has no append
    arena = stub({"free_blocks": [(0, 4)], "free_slots": 4}, refuse=("alloc",))
    blocks = arena.free_blocks()
    blocks.append((9, 9))  # a fresh copy each time
    assert arena.free_blocks() == [(0, 4)] and arena.free_slots() == 4
    with pytest.raises(AssertionError, match="alloc"):
        arena.alloc(1)
    with pytest.raises(AttributeError):
        arena.free(0)


def test_readings_with_arguments_calls_on_a_reading_and_library_objects_for_the_student():
    from kvcourse.assignment_checks.harness import calls_on_reading, kernel_object, reading
    from kvcourse.blocks import BlockPool

    pool = kernel_object(BlockPool, 4, 2, taken=[1])
    assert isinstance(pool, BlockPool) and pool.num_free == 3
    assert reading(pool, [("call", "ref_count", (1,)), ("call", "ref_count", (0,))]) == [1, 0]
    table = types.SimpleNamespace(pool=pool, num_tokens=0)  # another object, read alongside
    assert reading(table, ["num_tokens", ("of", pool, [("call", "ref_counts"), "num_free"])]) == [
        0,
        [(0, 1, 0, 0), 3],
    ]
    with pytest.raises(ValueError, match="a reading is"):
        reading(pool, ("call", "ref_count", [1]))  # the arguments as a tuple
    with pytest.raises(TypeError, match="course library's classes"):
        kernel_object(list)
    holder = types.SimpleNamespace(kept=[1, 2], give=lambda: holder.kept)
    assert calls_on_reading(holder, "kept", [("append", (3,)), ("nope", ()), ("clear", ())]) == 1
    assert calls_on_reading(holder, ("call", "give"), [("reverse", ())]) == 1
    assert holder.kept == [3, 2, 1]
