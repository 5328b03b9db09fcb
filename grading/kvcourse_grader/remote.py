"""The student's code in a snapshot of their kernel, as the grader sees it: a :class:`Channel`
to the snapshot, and :class:`Proxy` objects for the student's functions, classes and objects.

A proxy's calls, attributes, ``len``, ``in``, iteration and indexing cross the channel; plain
values (numbers, strings, lists, dicts, sets, bytes, numpy scalars and arrays) cross as data
(:func:`~kvcourse_grader.snapshot_server.encode`), and a list, dict or set the test passes to the
student's code comes back as the call left it. What the student's code raises is raised here as
an exception of the same name, derived from the same builtin class (:func:`student_error`), so a
test's ``except ValueError`` works as in the kernel.

Two things differ from the kernel, both stricter: ``==`` between a proxy (a student's object, not
a plain value) and anything else is identity, so an object that claims to equal everything proves
nothing; and a test cannot hand the student's code an object of its own (only data and the
student's own objects cross). :mod:`kvcourse_grader.hidden_runs` runs hidden cells with these.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import socket
import sys
import time
import types
from typing import Any

from kvcourse_grader.snapshot_server import (
    ChannelError,
    decode,
    encode,
    library_object,
    receive,
    send,
)

__all__ = ["CellTimeout", "Channel", "Proxy", "StudentCodeError", "put_back", "student_error"]


class StudentCodeError(Exception):
    """The student's code raised something that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``): here it may not stop the grader."""


_ERROR_CLASSES: dict[tuple[str, type], type] = {}


def _named(name: str, base: type) -> type:
    """A subclass of ``base`` named ``name`` (the student's class, as far as a test can tell)."""
    cls = _ERROR_CLASSES.get((name, base))
    if cls is None:
        cls = _ERROR_CLASSES[(name, base)] = type(name, (base,), {"__module__": "student"})
    return cls


def _library_error(module: str, qualname: str) -> type | None:
    """The grader's own copy of a course-library exception class, or None."""
    if not module.startswith("kvcourse."):
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return found if isinstance(found, type) and issubclass(found, Exception) else None


def student_error(record: dict) -> BaseException:
    """An exception to raise here for one the student's code raised in the snapshot: of a class
    named as theirs, derived from the nearest builtin one (so ``except ValueError`` catches a
    student's ``ValueError`` subclass), with their message."""
    name, message = str(record.get("name", "Error")), str(record.get("message", ""))
    for module, qualname in record.get("library", [])[:1]:
        found = _library_error(str(module), str(qualname))
        if found is not None:
            with contextlib.suppress(Exception):
                return found(message) if found.__name__ == name else _named(name, found)(message)
    for base_name in list(record.get("bases", [])) + ["StudentCodeError"]:
        base = getattr(builtins, str(base_name), None) if base_name != "StudentCodeError" else None
        base = StudentCodeError if base_name == "StudentCodeError" else base
        if not (isinstance(base, type) and issubclass(base, Exception)):
            continue
        cls = base if base.__name__ == name else _named(name, base)
        try:
            return cls(message)
        except TypeError:  # a builtin whose constructor wants more (UnicodeDecodeError)
            continue
    return StudentCodeError(f"{name}: {message}")


class CellTimeout(Exception):
    """The hidden cell ran past its time limit while the student's code was answering."""


class Channel:
    """One snapshot's connection: requests go out, answers (or the student's errors) come back."""

    def __init__(self, sock: socket.socket, deadline: float | None = None) -> None:
        self.sock, self.deadline = sock, deadline
        self.proxies: dict[int, Proxy] = {}
        self.requests = 0
        self.closed = self.lost = False

    def proxy(self, number: int, type_name: str) -> Proxy:
        found = self.proxies.get(number)
        if found is None:
            found = self.proxies[number] = Proxy(self, number, type_name)
        return found

    def value(self, data: Any) -> Any:
        """Data from the snapshot as a value here (handles as proxies)."""
        if type(data) is dict and data.get("t") == "module":
            return _grader_module(str(data.get("v")))
        if type(data) is dict and data.get("t") == "library":  # the grader's own class or function
            return library_object(str(data.get("m")), str(data.get("q")))
        try:
            return decode(data, self.proxy)
        except (ValueError, TypeError, KeyError, OverflowError) as err:
            # Never an error a test's ``except ValueError`` could take for the student's own.
            raise ChannelError(f"the snapshot sent a value that cannot be read: {err}") from None

    def data(self, value: Any) -> Any:
        """A value of the test's as data for the snapshot."""
        return encode(value, self._handle)

    def _handle(self, value: Any) -> dict:
        if isinstance(value, Proxy) and value._channel is self:
            return {"t": "h", "v": value._number}
        raise TypeError(
            f"a hidden test running in the grader passed a {type(value).__name__} to the student's "
            "code; only plain data and the student's own objects cross to the snapshot (let the "
            "cell run in its snapshot instead: take out its GRADER_SIDE line)"
        )

    def ask(self, op: str, **fields: Any) -> Any:
        """Send one request; the raw answer, or the student's error raised here."""
        if self.closed:
            raise ChannelError("the snapshot's channel is closed")
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and left <= 0:
            raise CellTimeout("the hidden tests ran past the time limit")
        self.sock.settimeout(left)
        self.requests += 1
        try:
            send(self.sock, {"op": op, **fields})
            reply = receive(self.sock)
        except TimeoutError:
            self.close()
            raise CellTimeout("the student's code ran past the time limit") from None
        except (OSError, ChannelError) as err:
            self.lost = True
            self.close()
            raise ChannelError(f"the snapshot was lost: {err}") from None
        if type(reply) is not dict:
            raise ChannelError("the snapshot sent something that is not an answer")
        if "error" in reply:
            error = student_error(reply["error"] if type(reply["error"]) is dict else {})
            lines = reply.get("traceback")
            if type(lines) is list:
                error.snapshot_traceback = [str(line)[:2000] for line in lines[:40]]
            raise error
        return reply.get("ok")

    def lookup(self, name: str) -> Any:
        return self.value(self.ask("lookup", name=name))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self.sock.settimeout(1)
                send(self.sock, {"op": "done"})
            self.sock.close()


def _grader_module(name: str) -> types.ModuleType:
    """The grader's own copy of a module the student's namespace names (the standard library's
    or the course library's); anything else is not looked up."""
    top = name.split(".")[0]
    if top in ("antigravity", "this") or not (top in sys.stdlib_module_names or top == "kvcourse"):
        raise NameError(f"module {name!r} of the student's namespace is not used by the tests")
    return importlib.import_module(name)


def put_back(original: Any, now: Any) -> None:
    """Make the test's list, dict, set or tensor ``original`` what the student's code left
    (``now``)."""
    torch = sys.modules.get("torch")
    if torch is not None and type(original) is torch.Tensor and type(now) is torch.Tensor:
        with torch.no_grad():
            original.resize_(now.shape).copy_(now.to(original.dtype))
        return
    if type(original) is list and type(now) is list:
        original[:] = now
    elif type(original) in (dict, set) and type(now) is type(original):
        original.clear()
        original.update(now)


class Proxy:
    """A student's function, class or object, in the snapshot, as the test sees it here."""

    __slots__ = ("_channel", "_number", "_type")

    def __init__(self, channel: Channel, number: int, type_name: str) -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_number", number)
        object.__setattr__(self, "_type", type_name)

    def _ask(self, op: str, **fields: Any) -> Any:
        return self._channel.ask(op, h=self._number, **fields)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(args, kwargs, keep=False)

    def _call(self, args: tuple, kwargs: dict, keep: bool) -> Any:
        """The call in the snapshot; its result as data, or (``keep``) as a handle to it there."""
        data = self._channel.data
        answer = self._ask(
            "call",
            args=[data(a) for a in args],
            kwargs=[[k, data(v)] for k, v in kwargs.items()],
            keep=keep,
        )
        for where, now in answer.get("changed", []):
            original = args[where] if isinstance(where, int) else kwargs.get(where)
            put_back(original, self._channel.value(now))
        return self._channel.value(answer.get("result"))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._channel.value(self._ask("getattr", name=name))

    def __setattr__(self, name: str, value: Any) -> None:
        self._ask("setattr", name=name, value=self._channel.data(value))

    def __getitem__(self, key: Any) -> Any:
        return self._channel.value(self._ask("getitem", key=self._channel.data(key)))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._ask("setitem", key=self._channel.data(key), value=self._channel.data(value))

    def __delitem__(self, key: Any) -> None:
        self._ask("delitem", key=self._channel.data(key))

    def __contains__(self, value: Any) -> bool:
        return bool(self._channel.value(self._ask("contains", value=self._channel.data(value))))

    def __iter__(self):
        return iter(self._channel.value(self._ask("iter")))

    def __len__(self) -> int:
        return self._channel.value(self._ask("len"))

    def __bool__(self) -> bool:
        return bool(self._channel.value(self._ask("bool")))

    def __int__(self) -> int:
        return self._channel.value(self._ask("int"))

    def __index__(self) -> int:
        return self._channel.value(self._ask("index"))

    def __float__(self) -> float:
        return self._channel.value(self._ask("float"))

    def __repr__(self) -> str:
        try:
            return str(self._ask("repr"))
        except Exception:
            return f"<the student's {self._type}>"

    def __str__(self) -> str:
        try:
            return str(self._ask("str"))
        except Exception:
            return f"<the student's {self._type}>"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return hash((id(self._channel), self._number))
