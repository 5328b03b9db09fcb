"""Running a hidden cell once every cell of the notebook has run, against the snapshot of the
kernel taken where the cell stands (:mod:`kvcourse_grader.snapshots`).

* :func:`run_in_snapshot`: the cell runs *in* its snapshot, on the student's namespace there, as it
  would have in the kernel; only its verdict comes back (its error's name and message, what it
  wrote to stderr). Whatever the student's code reads of the test there (a trace function, the
  caller's frame) goes nowhere: the snapshot prints to nothing and ends right after.
* :func:`run_hidden_cell`, for a cell whose hidden region holds the line :data:`GRADER_SIDE`: the
  cell runs *here*, in the grader's process, outside the sandbox, and calls the student's code in
  the snapshot through :mod:`kvcourse_grader.remote`. A name the cell does not define is looked up
  in the snapshot; the harness's ``switched_off`` switches the library's reference off in the
  snapshot, ``each``, ``contained``, ``calls_on``, ``reading`` and ``attach`` make many calls
  or reads in one exchange, ``stub`` makes a stand-in there, ``kernel_object`` an object of the
  library's there (a block pool the student's code is handed), ``kernel_copy`` private copies of
  library modules there (a simulator the student's code runs on, called through handles, with
  ``kept`` leaving a result there, such as a workload, rather than bringing it back),
  ``stand_in_calls`` a student's blockwise attention under the test's own online-softmax step
  there, and
  ``checking`` names the failed property as in the kernel. The test's code, its expected values
  and its oracles never enter a process the student's code runs in: the student's code sees only
  the arguments it is called with (so it cannot, say, read the expected value from its caller's
  frame and return it).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import io
import itertools
import types
from typing import Any

from kvcourse.assignment_checks import harness as local_harness
from kvcourse_grader.remote import CellTimeout, Channel, Proxy, put_back, student_error
from kvcourse_grader.snapshot_server import ChannelError, traceback_lines

__all__ = [
    "GRADER_SIDE",
    "Around",
    "RemoteHarness",
    "run_hidden_cell",
    "run_in_snapshot",
    "runs_in_grader",
]

#: The line in a hidden region that makes its cell run in the grader.
GRADER_SIDE = "# These hidden tests run in the grader and call your code in a copy of your kernel."


def runs_in_grader(source: str) -> bool:
    """Whether a hidden cell's ``source`` asks to run in the grader (:data:`GRADER_SIDE`)."""
    return any(line.strip() == GRADER_SIDE for line in source.split("\n"))


class RemoteHarness:
    """The harness names a hidden cell imports, for a cell that runs in the grader: the grader's
    own ``checking``, ``module_of`` and ``fresh_copy``, and a ``switched_off`` that switches the
    library off in the snapshot, where the student's code runs."""

    def __init__(self, channel: Channel, case_seed: str = "") -> None:
        self.channel, self.run_seed = channel, case_seed
        self.numbers = itertools.count(1)

    def case_seed(self, fixed: int) -> str:
        """The harness's ``case_seed``, with the grading run's seed (the library's without one)."""
        if not self.run_seed:
            return local_harness.case_seed(fixed)
        return f"{int(fixed)}/{self.run_seed}"

    @staticmethod
    def owner_spec(owner: object) -> list:
        if isinstance(owner, Proxy):
            return ["h", owner._number]
        if isinstance(owner, types.ModuleType):
            return ["m", owner.__name__, ""]
        module, qualname = getattr(owner, "__module__", None), getattr(owner, "__qualname__", None)
        if not (isinstance(module, str) and isinstance(qualname, str)):
            raise TypeError(f"switched_off cannot name {owner!r} in the snapshot")
        return ["q", module, qualname]

    @contextlib.contextmanager
    def switched_off(self, *owners: object, reference: str, watch: bool = False):
        number = next(self.numbers)
        specs = [self.owner_spec(o) for o in owners]
        self.channel.ask("switch_on", id=number, owners=specs, reference=reference, watch=watch)
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.channel.ask("switch_off", id=number, failed=True)
            raise
        self.channel.ask("switch_off", id=number, failed=False)

    def each(self, function: Any, arguments: Any) -> list:
        """The harness's ``each``: for a student's function, every call in one request."""
        if not isinstance(function, Proxy):
            return local_harness.each(function, arguments)
        data = self.channel.data
        rows = [[data(a) for a in args] for args in arguments]
        return self.channel.value(function._ask("each", args=rows))

    def contained(self, container: Any, items: Any) -> list[bool]:
        """The harness's ``contained``: for a student's object, every ``in`` in one request."""
        if not isinstance(container, Proxy):
            return local_harness.contained(container, items)
        rows = [self.channel.data(item) for item in items]
        return self.channel.value(container._ask("contained", items=rows))

    def calls_on(self, obj: Any, calls: Any, after: Any = ()) -> tuple[list, Exception | None]:
        """The harness's ``calls_on``: for a student's object, every call in one request."""
        if not isinstance(obj, Proxy):
            return local_harness.calls_on(obj, calls, after)
        calls, data = [(c[0], tuple(c[1]), *c[2:3]) for c in calls], self.channel.data
        rows = [
            [str(c[0]), [data(a) for a in c[1]], *([data(list(c[2]))] if len(c) > 2 else [])]
            for c in calls
        ]
        answer = obj._ask("calls_on", calls=rows, after=data(list(after)))
        for (_, args, *_), changes in zip(calls, answer.get("changed", []), strict=False):
            for where, now in changes:
                put_back(args[where], self.channel.value(now))
        value = self.channel.value
        made = [(value(result), value(readings)) for result, readings in answer["steps"]]
        record = answer.get("error")
        return made, (student_error(record) if type(record) is dict else None)

    def reading(self, obj: Any, what: Any) -> Any:
        """The harness's ``reading``: for a student's object, read in one request."""
        if not isinstance(obj, Proxy):
            return local_harness.reading(obj, what)
        data = self.channel.data
        return self.channel.value(
            self.channel.ask("harness", name="reading", args=[data(obj), data(what)])
        )

    def attach(self, parent: Any, attribute: str, key: Any, child: Any) -> None:
        """The harness's ``attach``: hangs a student's node under another in one request."""
        if not isinstance(parent, Proxy):
            return local_harness.attach(parent, attribute, key, child)
        args = [self.channel.data(a) for a in (parent, attribute, key, child)]
        self.channel.ask("harness", name="attach", args=args)
        return None

    def calls_on_result(self, function: Any, args: Any, calls: Any) -> int:
        """The harness's ``calls_on_result``: the call and the calls on its result, in the
        snapshot (where the student's code keeps what it returned)."""
        if not isinstance(function, Proxy):
            return local_harness.calls_on_result(function, args, calls)
        rows = [[str(name), list(call_args)] for name, call_args in calls]
        fields = [self.channel.data(v) for v in (function, list(args), rows)]
        return self.channel.value(self.channel.ask("harness", name="calls_on_result", args=fields))

    def calls_on_reading(self, obj: Any, what: Any, calls: Any) -> int:
        """The harness's ``calls_on_reading``: the reading and the calls on what came back, in
        the snapshot (where the student's object keeps what it handed out)."""
        if not isinstance(obj, Proxy):
            return local_harness.calls_on_reading(obj, what, calls)
        rows = [[str(name), list(call_args)] for name, call_args in calls]
        fields = [self.channel.data(v) for v in (obj, what, rows)]
        return self.channel.value(self.channel.ask("harness", name="calls_on_reading", args=fields))

    def is_subclass(self, cls: Any, of: Any) -> bool:
        """The harness's ``is_subclass``, for a student's class and a library class: asked in
        the snapshot, where both are."""
        if not isinstance(cls, Proxy):
            return local_harness.is_subclass(cls, of)
        answer = self.channel.ask("is_subclass", h=cls._number, owner=self.owner_spec(of))
        return self.channel.value(answer)

    def kernel_object(self, cls: Any, *args: Any, **kwargs: Any) -> Any:
        """The harness's ``kernel_object``, made in the snapshot from the library there: a handle
        the student's code can use and the test reads."""
        module = getattr(cls, "__module__", "") if isinstance(cls, type) else ""
        if not (module == "kvcourse" or str(module).startswith("kvcourse.")):
            raise TypeError(
                f"kernel_object makes objects of the course library's classes, not {cls!r}"
            )
        spec = self.owner_spec(cls)
        data = self.channel.data
        answer = self.channel.ask(
            "make",
            owner=spec,
            args=[data(a) for a in args],
            kwargs=[[k, data(v)] for k, v in kwargs.items()],
        )
        return self.channel.value(answer)

    def kernel_copy(self, *names: str, share: Any = ()) -> Any:
        """The harness's ``kernel_copy``: the private copies made in the snapshot by its private
        harness, as a handle (``copy["kvcourse.serving"]`` is a handle to a module there)."""
        answer = self.channel.ask(
            "fresh_copy", names=[str(n) for n in names], share=[str(n) for n in share]
        )
        return self.channel.value(answer)

    @staticmethod
    def kept(function: Any, *args: Any, **kwargs: Any) -> Any:
        """The harness's ``kept``: a function of the snapshot called there, its result left
        there (a handle here)."""
        if not isinstance(function, Proxy):
            return local_harness.kept(function, *args, **kwargs)
        return function._call(args, kwargs, keep=True)

    def stand_in_calls(
        self, function: Any, calls: Any, name: str = "online_softmax_update"
    ) -> list:
        """The harness's ``stand_in_calls``: every call of a student's blockwise attention under
        the test's own online-softmax step, made in the snapshot in one exchange; what each
        returned, its steps' keys, its reads of several blocks and whether it changed its
        arguments come back as data."""
        if not isinstance(function, Proxy):
            return local_harness.stand_in_calls(function, calls, name)
        rows = [[list(args), dict(kwargs), list(watched)] for args, kwargs, watched in calls]
        fields = [self.channel.data(v) for v in (function, rows, str(name))]
        return self.channel.value(self.channel.ask("harness", name="stand_in_calls", args=fields))

    def stub(self, answers: Any, refuse: Any = ()) -> Any:
        """The harness's ``stub``, made in the snapshot: a handle the student's code can use."""
        args = [self.channel.data(dict(answers)), self.channel.data(tuple(refuse))]
        return self.channel.value(self.channel.ask("harness", name="stub", args=args))

    def names(self) -> dict[str, Any]:
        def stand_in(*args: Any, **kwargs: Any):
            raise RuntimeError("stand_in works only in a hidden cell that runs in the kernel")

        return {
            "checking": local_harness.checking,
            "module_of": local_harness.module_of,
            "fresh_copy": local_harness.fresh_copy,
            "PropertyFailed": local_harness.PropertyFailed,
            "switched_off": self.switched_off,
            "each": self.each,
            "contained": self.contained,
            "calls_on": self.calls_on,
            "reading": self.reading,
            "attach": self.attach,
            "stub": self.stub,
            "kernel_object": self.kernel_object,
            "kernel_copy": self.kernel_copy,
            "stand_in_calls": self.stand_in_calls,
            "kept": self.kept,
            "calls_on_result": self.calls_on_result,
            "calls_on_reading": self.calls_on_reading,
            "is_subclass": self.is_subclass,
            "stand_in": stand_in,
            "case_seed": self.case_seed,
        }


class _Namespace(dict):
    """The hidden cell's globals: what it defines, then what earlier grader-side hidden cells
    defined, then the snapshot's names (builtins stay builtins)."""

    def __init__(self, channel: Channel, shared: dict[str, Any]) -> None:
        super().__init__()
        self.channel, self.shared = channel, shared

    def __missing__(self, name: str) -> Any:
        if name in self.shared:
            return self.shared[name]
        if name.startswith("__") or hasattr(builtins, name):
            raise KeyError(name)
        try:
            value = self.channel.lookup(name)
        except NameError:
            raise KeyError(name) from None
        self[name] = value
        return value


_CHECKS = ("kvcourse.assignment_checks", "kvcourse.assignment_checks.harness")


def _bind_checks(source: str, names: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``source`` with each ``from kvcourse.assignment_checks[.harness] import ...`` replaced by
    ``pass``, and the names it imported: the remote harness's where it has one (``names``), the
    grader's own module's otherwise."""
    tree = ast.parse(source)
    lines, bound = source.split("\n"), {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module in _CHECKS and node.level == 0):
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            if alias.name == "*":
                raise ValueError(f"line {node.lineno}: import the checks' names one by one")
            value = names[alias.name] if alias.name in names else getattr(module, alias.name)
            bound[alias.asname or alias.name] = value
        first, last = node.lineno, node.end_lineno or node.lineno
        indent = lines[first - 1][: node.col_offset]
        lines[first - 1 : last] = [f"{indent}pass"] + [""] * (last - first)
    return "\n".join(lines), bound


class Around:
    """What the grader does with a snapshot just before a hidden cell runs against it and just
    after (the preprocessor has it resume and then read the kernel's audit record there)."""

    def enter(self, channel: Channel) -> None:
        """Before the cell: nothing here."""

    def leave(self, channel: Channel) -> None:
        """After the cell, before the channel closes: nothing here."""


def _enter(around: Around | None, channel: Channel) -> None:
    if around is not None:
        with contextlib.suppress(Exception):  # a broken channel fails the cell itself
            around.enter(channel)


def _leave(around: Around | None, channel: Channel) -> None:
    if around is not None and not channel.closed:
        with contextlib.suppress(Exception):
            around.leave(channel)


def run_hidden_cell(
    source: str,
    channel: Channel | None,
    shared: dict[str, Any],
    index: int,
    not_run: str,
    around: Around | None = None,
    case_seed: str = "",
) -> list[dict]:
    """Run a hidden cell's ``source`` here against its snapshot (``channel``); its outputs as
    nbformat dicts: what the cell printed, and an error output if it failed. Without a channel
    (the snapshot could not be taken) the cell gets a ``not_run`` error. Names the cell defines
    (other than the student's objects) go into ``shared`` for later grader-side cells;
    ``case_seed`` is the grading run's seed for the cell's random cases (harness ``case_seed``)."""
    if channel is None:
        return [_error(not_run, "the hidden tests could not reach a snapshot of your kernel")]
    _enter(around, channel)
    namespace = _Namespace(channel, shared)
    namespace["__name__"] = "__main__"
    printed, warned = io.StringIO(), io.StringIO()
    outputs: list[dict] = []
    try:
        source, bound = _bind_checks(source, RemoteHarness(channel, case_seed).names())
        namespace.update(bound)
        code = compile(source, f"<hidden tests, cell {index}>", "exec")
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(warned):
            exec(code, namespace)
    except CellTimeout:
        outputs.append(_error("CellTimeoutError", "the cell ran past the time limit"))
    except ChannelError as err:
        outputs.append(_error(not_run, f"not run: {err}"))
    except Exception as err:  # a failed test, or the student's error it did not catch
        outputs.append(_error(type(err).__name__, str(err), traceback_lines(err)))
    finally:
        _leave(around, channel)
        channel.close()
    for name, value in namespace.items():
        if not name.startswith("__") and not isinstance(value, Proxy):
            shared.setdefault(name, value)
    streams = [("stdout", printed.getvalue()), ("stderr", warned.getvalue())]
    head = [{"output_type": "stream", "name": n, "text": t[:100_000]} for n, t in streams if t]
    return head + outputs


def run_in_snapshot(
    source: str, channel: Channel | None, index: int, not_run: str, around: Around | None = None
) -> list[dict]:
    """Run a hidden cell's ``source`` (its harness import already made private) *in* its
    snapshot, on the student's namespace there, for a cell that does not run in the grader: its
    outputs as nbformat dicts, an error output if it failed. Whatever the student's code in the
    snapshot reads of the cell goes nowhere: the snapshot prints nothing anyone sees and ends
    right after, once every cell of the notebook has run."""
    if channel is None:
        return [_error(not_run, "the hidden tests could not reach a snapshot of your kernel")]
    _enter(around, channel)
    try:
        answer = channel.ask("run_cell", source=source, filename=f"<hidden tests, cell {index}>")
    except CellTimeout:
        return [_error("CellTimeoutError", "the cell ran past the time limit")]
    except ChannelError as err:
        return [_error(not_run, f"not run: {err}")]
    except Exception as err:  # the cell failed
        lines = getattr(err, "snapshot_traceback", None)
        return [_error(type(err).__name__, str(err), lines)]
    finally:
        _leave(around, channel)
        channel.close()
    written = str((answer or {}).get("stderr", "")) if type(answer) is dict else ""
    return [{"output_type": "stream", "name": "stderr", "text": written}] if written else []


def _error(ename: str, evalue: str, traceback_lines: list[str] | None = None) -> dict:
    return {
        "output_type": "error",
        "ename": ename,
        "evalue": evalue[:5000],
        "traceback": traceback_lines or [f"{ename}: {evalue[:5000]}"],
    }
