"""The kernel's side of hidden tests that run in the grader: a snapshot of the student's kernel
that answers calls and knows nothing of the tests.

Where a hidden cell stands, :class:`~kvcourse_grader.preprocessors.RobustExecute` has the kernel
run :func:`take_snapshot`: the kernel forks, the parent goes on with the notebook, and the child
(the *snapshot*, the student's namespace as it was at that cell) connects to the grader's socket
and waits. Only once every cell of the notebook has run, and nothing the kernel does can reach the
student any more, does the grader run the hidden test, in its own process
(:mod:`kvcourse_grader.remote`), calling the snapshot's functions and objects across the socket:
values go as data (:func:`encode`; the course library's frozen dataclasses as records of their
fields), objects as numbered handles. The test's code, its expected
values and its oracles never enter a process the student's code runs in.

This file is sent into the kernel as source (like the private harness) and runs there, so it
imports only the standard library; the grader imports the same :func:`encode` and :func:`decode`.
A message is a 4-byte big-endian length and that many bytes of JSON.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import operator
import struct
import sys
from typing import Any

#: The largest message either side accepts (bytes of JSON).
MAX_MESSAGE = 64 * 2**20
#: How deep data may nest before the rest goes as handles.
MAX_DEPTH = 64
#: The most items an iteration over a handle brings back.
MAX_ITEMS = 2_000_000

_SCALARS = (type(None), bool, int, float, str)
_FLAT = frozenset([type(None), bool, int, float])  # crosses as it is, in a list
_CONTAINERS = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


#: The harness functions a grader-side hidden cell may call here (``op: harness``).
HARNESS_CALLS = frozenset(
    ["reading", "attach", "stub", "calls_on_result", "calls_on_reading", "stand_in_calls"]
)


class ChannelError(RuntimeError):
    """The other side broke the protocol (a message too long, not JSON, the socket closed)."""


def _numpy_value(value: Any) -> dict | None:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    if isinstance(value, numpy.generic) and value.dtype.kind in "biufc":
        item = value.item()
        if value.dtype.kind == "c":
            item = [item.real, item.imag]
        return {"t": "np", "d": value.dtype.str, "v": item}
    if type(value) is numpy.ndarray and value.dtype.kind in "biuf" and value.size <= MAX_ITEMS:
        return {
            "t": "nd",
            "d": value.dtype.str,
            "s": list(value.shape),
            "v": value.ravel().tolist(),
        }
    return None


#: The torch dtypes a tensor may have to cross as data (by name, as ``torch.<name>``).
TORCH_DTYPES = frozenset(
    ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8"]
    + ["bool"]
)


def _torch_value(value: Any) -> dict | None:
    """A CPU tensor of exactly ``torch.Tensor`` (a subclass is a handle) as its dtype, shape and
    bytes (base64: exact, NaN and the sign of zero included, and compact for the K/V blocks an
    attention test hands over); None for anything else."""
    torch = sys.modules.get("torch")
    if torch is None or type(value) is not torch.Tensor:
        return None
    dtype = str(value.dtype).removeprefix("torch.")
    if dtype not in TORCH_DTYPES or value.device.type != "cpu" or value.is_sparse:
        return None
    if value.numel() > MAX_ITEMS:
        return None
    raw = value.detach().reshape(-1).clone().view(torch.uint8).numpy().tobytes()
    return {"t": "pt", "d": dtype, "s": list(value.shape), "v": base64.b64encode(raw).decode()}


def _is_library(module: object) -> bool:
    return isinstance(module, str) and (module == "kvcourse" or module.startswith("kvcourse."))


def _record(value: Any) -> list | None:
    """The fields a frozen dataclass of the course library is built from (None for anything
    else): a ``ClusterView`` or a ``Decision`` crosses as its values, rebuilt on the other side."""
    kind = type(value)
    params = kind.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen or not _is_library(kind.__module__):
        return None
    return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(kind) if f.init]


def library_object(module: str, qualname: str) -> Any:
    """The course library's ``module.qualname``, imported here; ``ChannelError`` for a name
    outside the library or not found."""
    if not _is_library(module):
        raise ChannelError(f"{module!r} is not a module of the course library")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as err:
        raise ChannelError(f"no {module}.{qualname} here: {err}") from None
    return found


def encode(value: Any, handle_of: Any, depth: int = 0) -> Any:
    """``value`` as JSON-ready data: plain values as they are, containers tagged, numpy scalars
    and arrays with their dtype, and anything else as ``{"t": "h", "v": handle_of(value)}``.

    Exact types only: a subclass of ``int`` or ``list`` (which may redefine ``==``) is a handle."""
    kind = type(value)
    if kind in _SCALARS:
        return value if kind is not str or len(value) <= MAX_MESSAGE // 4 else handle_of(value)
    if depth >= MAX_DEPTH:
        return handle_of(value)
    if kind in _CONTAINERS:
        if set(map(type, value)) <= _FLAT:  # the common case, without a call per item
            return {"t": _CONTAINERS[kind], "v": list(value)}
        return {"t": _CONTAINERS[kind], "v": [encode(v, handle_of, depth + 1) for v in value]}
    if kind is dict:
        pairs = [
            [encode(k, handle_of, depth + 1), encode(v, handle_of, depth + 1)]
            for k, v in value.items()
        ]
        return {"t": "dict", "v": pairs}
    if kind is bytes:
        return {"t": "bytes", "v": base64.b64encode(value).decode("ascii")}
    fields = _record(value)
    if fields is not None:
        body = [[name, encode(v, handle_of, depth + 1)] for name, v in fields]
        return {"t": "rec", "m": kind.__module__, "q": kind.__qualname__, "v": body}
    found = _numpy_value(value)
    if found is None:
        found = _torch_value(value)
    return found if found is not None else handle_of(value)


def decode(data: Any, from_handle: Any) -> Any:
    """The value :func:`encode` made ``data`` from; a handle becomes ``from_handle(number, type
    name)``. Raises ``ChannelError`` for anything :func:`encode` never writes."""
    if type(data) in _SCALARS:
        return data
    if type(data) is not dict or "t" not in data:
        raise ChannelError(f"not an encoded value: {type(data).__name__}")
    tag, body = data["t"], data.get("v")
    if tag == "h":
        return from_handle(int(body), str(data.get("n", "object"))[:100])
    if tag in ("list", "tuple", "set", "frozenset"):
        flat = set(map(type, body)) <= _FLAT
        items = body if flat else [decode(v, from_handle) for v in body]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {decode(k, from_handle): decode(v, from_handle) for k, v in body}
    if tag == "bytes":
        return base64.b64decode(body)
    if tag == "rec":  # rebuilt from its fields, by this side's own class (its checks run)
        kind = library_object(str(data["m"]), str(data["q"]))
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            raise ChannelError(f"{data['m']}.{data['q']} is not a dataclass")
        fields = {str(name): decode(v, from_handle) for name, v in body}
        try:
            return kind(**fields)
        except Exception as err:  # noqa: BLE001 - fields no constructor of the library accepts
            raise ChannelError(f"cannot rebuild a {kind.__name__}: {err}") from None
    if tag in ("np", "nd"):
        import numpy

        dtype = numpy.dtype(str(data["d"]))
        if dtype.kind not in "biufc":
            raise ChannelError(f"an array of kind {dtype.kind!r} does not cross the channel")
        if tag == "np":
            return dtype.type(complex(*body) if dtype.kind == "c" else body)
        return numpy.array(body, dtype=dtype).reshape([int(n) for n in data["s"]])
    if tag == "pt":
        name = str(data["d"])
        if name not in TORCH_DTYPES:
            raise ChannelError(f"a tensor of dtype {name!r} does not cross the channel")
        import torch

        shape, dtype = [int(n) for n in data["s"]], getattr(torch, name)
        raw = bytearray(base64.b64decode(str(body)))
        try:
            if not raw:
                return torch.empty(shape, dtype=dtype)
            return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
        except RuntimeError as err:  # bytes that are not a tensor of that dtype and shape
            raise ChannelError(f"a tensor that cannot be read: {err}") from None
    raise ChannelError(f"unknown tag {tag!r}")


def send(sock: Any, message: Any) -> None:
    """Send one message (JSON) on ``sock``."""
    payload = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(payload) > MAX_MESSAGE:
        raise ChannelError(f"a message of {len(payload):,} bytes is longer than {MAX_MESSAGE:,}")
    sock.sendall(struct.pack(">I", len(payload)) + payload)


def receive(sock: Any) -> Any:
    """Receive one message from ``sock`` (``ChannelError`` if it is too long or not JSON). The two
    sides take turns, one message each, so a read never takes in part of the next message."""
    data = b""
    while len(data) < 4:
        chunk = sock.recv(65536)
        if not chunk:
            raise ChannelError("the other side closed the channel")
        data += chunk
    (size,) = struct.unpack(">I", data[:4])
    if size > MAX_MESSAGE:
        raise ChannelError(f"a message of {size:,} bytes is longer than {MAX_MESSAGE:,}")
    parts, have = [data[4:]], len(data) - 4
    while have < size:
        chunk = sock.recv(min(size - have, 65536))
        if not chunk:
            raise ChannelError("the other side closed the channel")
        parts.append(chunk)
        have += len(chunk)
    body = b"".join(parts)
    if len(body) != size:
        raise ChannelError("a message longer than it said")
    try:
        return json.loads(body)
    except ValueError as err:
        raise ChannelError(f"a message that is not JSON: {err}") from None


def traceback_lines(err: BaseException) -> list[str]:
    """``err``'s traceback as IPython's error outputs begin it: a first line naming the error at
    the root of the chain (``MemoryError    Traceback (most recent call last)``), which the
    grader's run notes read, then the lines Python prints, cut short."""
    import traceback

    root = err
    while (root.__cause__ or root.__context__) is not None and len(str(root)) < 10**6:
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
        if root is err:
            break
    lines = traceback.format_exception(type(err), err, err.__traceback__)
    head = f"{type(root).__name__}    Traceback (most recent call last)"
    return [head] + [line[:2000] for line in lines[-40:]]


def error_record(err: BaseException) -> dict:
    """An exception raised by the student's code as data: its class's name, the builtin classes and
    the first course-library class it derives from (so the grader can raise one the test's
    ``except`` clauses catch, ``OutOfBlocksError`` among them) and its message, cut short."""
    builtins = [c.__name__ for c in type(err).__mro__ if c.__module__ == "builtins"]
    try:
        text = str(err)[:2000]
    except BaseException:  # a __str__ that raises
        text = "<the message could not be read>"
    library = [
        [c.__module__, c.__qualname__]
        for c in type(err).__mro__
        if str(c.__module__).startswith("kvcourse.")
    ]
    record = {"name": type(err).__name__[:100], "bases": builtins, "message": text}
    return {**record, "library": library[:1]}


class Snapshot:
    """The serving side: the student's namespace, the objects handed out by number, the library
    parts switched off, and one request answered at a time (:meth:`answer`).

    The harness's watch is a profile hook; it sees the student's code and not this server's own
    work (decoding, encoding, the socket), which runs with the hook taken off and put back."""

    def __init__(self, namespace: dict, harness: Any) -> None:
        self.namespace, self.harness = namespace, harness
        self.objects: dict[int, Any] = {}
        self.numbers: dict[int, int] = {}  # id(object) -> its handle
        self.switches: dict[int, Any] = {}
        self.hook: Any = None  # the profile hook the student's code runs under

    def handle_of(self, value: Any) -> dict:
        number = self.numbers.get(id(value))
        if number is None or self.objects.get(number) is not value:
            number = len(self.objects) + 1
            self.objects[number], self.numbers[id(value)] = value, number
        return {"t": "h", "v": number, "n": type(value).__name__}

    def out(self, value: Any) -> Any:
        return encode(value, self.handle_of)

    def value(self, data: Any) -> Any:
        return decode(data, lambda number, name: self.objects[number])

    def run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``: the student's code, under the profile hook it left set
        (none of the server's own code runs under a hook the student set)."""
        sys.setprofile(self.hook)
        try:
            return function(*args, **kwargs)
        finally:
            self.hook = sys.getprofile()
            sys.setprofile(None)

    def owner(self, spec: list) -> Any:
        """A library module, class or function named by the grader, or one of the handed-out
        objects, as an owner for the harness's ``switched_off``."""
        import importlib

        if spec[0] == "h":
            return self.objects[int(spec[1])]
        found = importlib.import_module(str(spec[1]))
        for part in str(spec[2]).split(".") if len(spec) > 2 and spec[2] else []:
            found = getattr(found, part)
        return found

    def switch(self, request: dict) -> None:
        """Switch the library off (``switch_on``) or back on (``switch_off``), with the hook."""
        if request["op"] == "switch_on":
            owners = [self.owner(spec) for spec in request["owners"]]
            switch = self.harness.switched_off(
                *owners, reference=str(request["reference"]), watch=bool(request["watch"])
            )
            self.run(switch.__enter__)
            self.switches[int(request["id"])] = switch
            return
        switch = self.switches.pop(int(request["id"]))
        if request.get("failed"):  # the test failed inside: only put the library back
            failure = RuntimeError("the test failed")
            try:
                self.run(switch.__exit__, RuntimeError, failure, None)
            except BaseException:  # noqa: BLE001 - its own failure is the one reported
                pass
            return
        self.run(switch.__exit__, None, None, None)

    def run_cell(self, source: str, filename: str) -> dict:
        """A hidden cell that runs here, in the snapshot, on the student's namespace: what it
        wrote to stderr (a cell that writes there fails, as in the kernel); raises its error."""
        code = compile(source, filename, "exec", dont_inherit=True)
        errors = _Record()
        sys.stdout, sys.stderr = _Sink(), errors
        try:
            self.run(exec, code, self.namespace)
        except BaseException as err:
            raise _Failed(error_record(err), traceback_lines(err)) from None
        finally:
            sys.stdout = sys.stderr = _Sink()
        return {"stderr": errors.text[:2000]}

    def calls_on(self, target: Any, request: dict) -> dict:
        """The harness's ``calls_on`` in one exchange: each call, the readings after it (with the
        snapshot's private harness), and the test's lists, dicts and sets as the calls left them;
        the error that stopped the calls, as data."""

        def readings(data: Any) -> list:  # the harness's readings: tuples, not JSON's lists
            return [tuple(w) if type(w) is list else w for w in self.value(data)]

        calls = [
            (str(row[0]), [self.value(a) for a in row[1]], *[readings(r) for r in row[2:3]])
            for row in request["calls"]
        ]
        after = readings(request["after"])
        given = [[(i, a, _contents(a)) for i, a in enumerate(call[1])] for call in calls]
        made, error = self.run(self.harness.calls_on, target, calls, after)
        changed = [
            [[i, self.out(a)] for i, a, before in args if _changed(a, before)] for args in given
        ]
        steps = [[self.out(result), self.out(readings)] for result, readings in made]
        failure = None if error is None else error_record(error)
        return {"steps": steps, "error": failure, "changed": changed}

    def answer(self, request: dict) -> Any:
        """The result of one request (``op`` and its arguments); raises what the student's code
        raised."""
        op, run = request["op"], self.run
        if op == "lookup":
            name = str(request["name"])
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            found = self.namespace[name]
            if type(found) is type(sys):  # a module: the grader imports its own
                return {"t": "module", "v": str(getattr(found, "__name__", ""))}
            named = _library_name(found)
            if named is not None:  # a class or function of the library: the grader's own
                return {"t": "library", "m": named[0], "q": named[1]}
            return self.out(found)
        if op in ("switch_on", "switch_off"):
            return self.switch(request)
        if op == "run_cell":
            return self.run_cell(str(request["source"]), str(request["filename"]))
        if op == "audit":  # a command to the kernel's audit hook, which reads compiled source
            compile(str(request["source"]), "<grader>", "exec", dont_inherit=True)
            stash = request.get("stash")
            return str(self.namespace.pop(str(stash), "")) if stash else None
        if op == "harness":  # one of the private harness's readers, on the student's objects
            name = str(request["name"])
            if name not in HARNESS_CALLS:
                raise ValueError(f"the harness has no {name!r} to call here")
            args = [self.value(a) for a in request["args"]]
            return self.out(run(getattr(self.harness, name), *args))
        if op == "make":  # an object of the library's, for the student's code: a handle
            owner = request["owner"]
            if not (type(owner) is list and len(owner) == 3 and owner[0] == "q"):
                raise ValueError("make names a class of the course library")
            if not _is_library(owner[1]):
                raise ChannelError(f"{owner[1]!r} is not a module of the course library")
            args = [self.value(a) for a in request["args"]]
            kwargs = {str(k): self.value(v) for k, v in request["kwargs"]}
            made = run(self.harness.kernel_object, self.owner(owner), *args, **kwargs)
            return self.handle_of(made)  # a handle even for what could cross as data
        if op == "fresh_copy":  # the simulator a test runs the student's code on: handles
            names = [str(name) for name in request["names"]]
            share = [str(name) for name in request["share"]]
            if not all(_is_library(name) for name in [*names, *share]):
                raise ChannelError("fresh_copy copies modules of the course library only")
            # The private harness's own work, never under a hook the student set.
            return self.handle_of(self.harness.fresh_copy(*names, share=share))
        target = self.objects[int(request["h"])]
        if op == "is_subclass":  # a student's class against a library class, named
            return self.out(run(issubclass, target, self.owner(request["owner"])))
        if op == "call":
            args = [self.value(a) for a in request["args"]]
            kwargs = {str(k): self.value(v) for k, v in request["kwargs"]}
            given = [(k, v, _contents(v)) for k, v in [*enumerate(args), *kwargs.items()]]
            result = run(target, *args, **kwargs)
            # The caller's lists, dicts and sets the call changed, as it left them: a test checks
            # that the student's code leaves them alone (or changes them as it should).
            changed = [[k, self.out(v)] for k, v, before in given if _changed(v, before)]
            kept = self.handle_of(result) if request.get("keep") else self.out(result)
            return {"result": kept, "changed": changed}
        if op == "each":
            rows = [[self.value(a) for a in row] for row in request["args"]]
            return self.out(run(lambda: [target(*row) for row in rows]))
        if op == "contained":
            items = [self.value(item) for item in request["items"]]
            return self.out(run(lambda: [item in target for item in items]))
        if op == "calls_on":
            return self.calls_on(target, request)
        if op == "getattr":
            return self.out(run(getattr, target, str(request["name"])))
        if op == "setattr":
            return run(setattr, target, str(request["name"]), self.value(request["value"]))
        if op == "getitem":
            return self.out(run(target.__getitem__, self.value(request["key"])))
        if op == "setitem":
            key, value = self.value(request["key"]), self.value(request["value"])
            return run(target.__setitem__, key, value)
        if op == "delitem":
            return run(target.__delitem__, self.value(request["key"]))
        if op == "iter":
            return self.out(run(_items, target))
        unary = {"len": len, "bool": bool, "int": int, "float": float, "index": int}
        if op in unary:
            return self.out(run(unary[op], target))
        if op == "contains":
            return self.out(run(lambda item: item in target, self.value(request["value"])))
        if op in ("repr", "str"):
            return run(repr if op == "repr" else str, target)[:2000]
        raise ValueError(f"unknown request {op!r}")

    def serve(self, sock: Any) -> None:
        """Answer requests until the grader says ``done`` or closes the channel."""
        self.hook = sys.getprofile()
        sys.setprofile(None)
        while True:
            request = receive(sock)
            if request.get("op") == "done":
                return
            try:
                reply = {"ok": self.answer(request)}
            except _Failed as failed:
                reply = {"error": failed.record, "traceback": failed.lines}
            except BaseException as err:  # noqa: BLE001 - the student's code may raise anything
                reply = {"error": error_record(err)}
            send(sock, reply)


def _library_name(value: Any) -> tuple[str, str] | None:
    """``(module, qualname)`` of a class or function of the course library that is what its
    module holds under that name (None for anything else, the student's own among them)."""
    if not isinstance(value, type) and type(value).__name__ != "function":
        return None
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not (_is_library(module) and isinstance(qualname, str)):
        return None
    try:
        return (module, qualname) if library_object(module, qualname) is value else None
    except ChannelError:
        return None


def _contents(value: Any) -> Any:
    """What a list, dict, set or tensor of the test's holds before a call (None for anything
    else)."""
    kind = type(value)
    if kind is list:
        return list(value)
    if kind is dict:
        return list(value.items())
    if _torch_value(value) is not None and value.numel() <= MAX_ITEMS // 4:
        return value.detach().clone()
    return set(value) if kind is set else None


def _changed(value: Any, before: Any) -> bool:
    """Whether the student's code changed a list, dict or set: compared item by item by identity
    (``is``), so no code of the student's runs to tell."""
    if before is None:
        return False
    torch = sys.modules.get("torch")
    if torch is not None and type(before) is torch.Tensor:  # the values, NaN equal to NaN
        if value.shape != before.shape or value.dtype != before.dtype:
            return True
        return not torch.allclose(value, before, rtol=0, atol=0, equal_nan=True)
    if type(value) is set:
        return len(value) != len(before) or not all(map(before.__contains__, value))
    now = list(value.items()) if type(value) is dict else value
    if len(now) != len(before):
        return True
    if type(value) is dict:
        return not all(k is a and v is b for (k, v), (a, b) in zip(now, before, strict=True))
    return not all(map(operator.is_, now, before))


def _items(iterable: Any) -> list:
    items = []
    for item in iterable:
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise ValueError(f"an iteration of more than {MAX_ITEMS:,} items")
    return items


class _Sink:
    """A stream that keeps nothing: what the snapshot prints goes nowhere."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class _Record(_Sink):
    """A stream that keeps the start of what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        if len(self.text) < 2000:
            self.text += str(text)[:2000]
        return len(text)


class _Failed(Exception):
    """A hidden cell that failed in the snapshot: its error as data, and its traceback."""

    def __init__(self, record: dict, lines: list[str]) -> None:
        super().__init__(record.get("name"))
        self.record, self.lines = record, lines


def take_snapshot(
    path: str, nonce: str, harness_source: str, cpu_seconds: int, wall_seconds: int, namespace: dict
) -> None:
    """Fork: the parent returns at once; the child connects to the grader at ``path``, says
    ``nonce``, and answers the grader's requests on ``namespace`` (the student's, as it is now)
    with a private copy of the harness compiled from ``harness_source``. The child never returns:
    it ends with ``os._exit``; whatever it prints goes nowhere, and ``cpu_seconds`` of CPU or
    ``wall_seconds`` of waiting end it."""
    import io
    import os
    import resource
    import signal
    import socket
    import types

    harness = types.ModuleType("kvcourse_snapshot_harness")
    exec(compile(harness_source, "kvcourse.assignment_checks.harness", "exec"), vars(harness))
    if os.fork():
        return
    status = 0
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        sys.stdout = sys.stderr = _Sink()
        sys.stdin = io.StringIO()
        os.setpgid(0, 0)  # out of the kernel's process group: an interrupt sent to it misses
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, int(wall_seconds)))
        torch = sys.modules.get("torch")
        if torch is not None:  # its OpenMP pool does not survive a fork: one thread, no pool
            torch.set_num_threads(1)
        cpu = max(1, int(cpu_seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        send(sock, {"nonce": nonce})
        Snapshot(namespace, harness).serve(sock)
    except BaseException:  # noqa: BLE001 - the child must end here, whatever happened
        status = 1
    finally:
        os._exit(status)
