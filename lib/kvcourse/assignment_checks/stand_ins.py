"""The test's own online-softmax step inside a student's blockwise attention (a2's Part 3b).

* :func:`stand_in`: while a block runs, the student's ``blockwise_attention`` calls the test's
  step in place of the student's ``online_softmax_update``, which checks the running state it is
  handed and counts the keys of each block;
* :func:`stand_in_calls`: many calls of the student's function under :func:`stand_in`, each with
  what it returned, the keys of each step, the reads that took several K/V blocks at once, and
  whether it left its arguments as they were (one exchange when the test runs in the grader).

Part of the harness: :mod:`kvcourse.assignment_checks.harness` imports these, and its private
copy at autograde inlines this file, so it imports nothing but the standard library (torch only
inside the functions).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["stand_in", "stand_in_calls"]


@contextlib.contextmanager
def stand_in(function: Callable, name: str = "online_softmax_update") -> Iterator[list[int]]:
    """While the block runs, ``function`` (blockwise attention) calls the test's own online-softmax
    step as ``name``: it checks that each call gets the state the one before returned (the start
    state first), computes the state from its definition over the blocks so far (``scores [H, b]``,
    ``values [H, b, D]``) and appends ``b`` to the list it yields."""
    import torch  # only the attention tests use this helper

    namespace, keys, seen, last = function.__globals__, [], [], []

    def update(running_max, running_sum, acc, scores, values):
        call = f"{function.__name__}'s call {len(keys) + 1} of {name}"
        heads, count = scores.shape
        assert values.shape == (heads, count, acc.shape[-1]), (
            f"{call}: expected values of shape [heads, keys, head_dim] = "
            f"{[heads, count, acc.shape[-1]]}, got {list(values.shape)}. Hint: heads first."
        )
        state = (running_max, running_sum, acc)
        before = last or (running_max, torch.zeros_like(running_sum), torch.zeros_like(acc))
        pairs = zip(state, before, strict=True)  # NaN counts as equal to NaN
        assert all(a.shape == b.shape and a.allclose(b, 0, 0, True) for a, b in pairs), (
            f"{call}: got a running state that is not "
            + ("the one the call before returned" if last else "the start state (sum and acc 0)")
            + ". Hint: start from (-inf, 0, 0) and pass each call's result on to the next block."
        )
        keys.append(int(count))
        seen.append((scores.clone(), values.clone()))
        s, v = (torch.cat([x[i] for x in seen], dim=1) for i in (0, 1))
        weights = torch.exp(s - s.amax(dim=-1, keepdim=True))
        last[:] = s.amax(dim=-1), weights.sum(dim=-1), torch.einsum("hb,hbd->hd", weights, v)
        return tuple(x.clone() for x in last)

    saved = namespace.pop(name, None)
    namespace[name] = update
    try:
        yield keys
    finally:
        namespace.pop(name)
        namespace.update({} if saved is None else {name: saved})


#: What a read of K/V blocks is called in torch: a read that gives several blocks is a gather.
BLOCK_READS = ("__getitem__", "index_select", "take", "gather", "take_along_dim", "index")
_WATCHED: dict[str, Any] = {}  # the tensor subclass that notes gathers, made on first use


def _watched_class() -> type:
    """A tensor subclass whose reads that take several blocks at once (a copy, not a view, of
    more than one block) are noted in ``gathers`` as their shapes."""
    if "class" not in _WATCHED:
        import torch

        class Watched(torch.Tensor):
            gathers: list[tuple[int, ...]] = []

            @classmethod
            def __torch_function__(cls, func, types=(), args=(), kwargs=None):
                with torch._C.DisableTorchFunctionSubclass():
                    out = func(*args, **(kwargs or {}))
                source = args[0] if args else None
                if (
                    getattr(func, "__name__", "") in BLOCK_READS
                    and isinstance(source, Watched)
                    and isinstance(out, torch.Tensor)
                    and out.dim() >= source.dim()
                    and out.shape[0] > 1
                    and out.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()
                ):
                    cls.gathers.append(tuple(out.shape))
                return out

        _WATCHED["class"] = Watched
    return _WATCHED["class"]


def _kept(value: Any) -> Any:
    """What an argument holds before a call, to tell afterwards whether the call changed it."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.as_subclass(torch.Tensor).detach().clone()
    return (type(value), list(value)) if isinstance(value, list | tuple) else None


def _same(value: Any, before: Any) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.as_subclass(torch.Tensor)
        return value.shape == before.shape and bool(
            torch.allclose(value, before, rtol=0, atol=0, equal_nan=True)
        )
    return before is None or (type(value), list(value)) == before


def stand_in_calls(
    function: Callable,
    calls: Iterable[tuple[Iterable[Any], dict[str, Any], Iterable[int]]],
    name: str = "online_softmax_update",
) -> list[tuple[Any, list[int], list[tuple[int, ...]], bool]]:
    """Call ``function`` (the student's blockwise attention) once per ``(args, kwargs, watched)``
    of ``calls``, under :func:`stand_in`, the tensors at the positions ``watched`` of ``args``
    (K/V blocks) noting every read of several blocks at once. For each call: what it returned,
    the keys of each online-softmax step (:func:`stand_in`'s list), the shapes of those reads,
    and whether the call left its arguments as they were (values, and a list's items). An error
    the function raises ends the calls."""
    watched_class = _watched_class()
    made = []
    for args, kwargs, watched in calls:
        args = list(args)
        before = [_kept(a) for a in args]
        for position in watched:
            args[position] = args[position].as_subclass(watched_class)
        watched_class.gathers = []
        with stand_in(function, name) as keys:
            got = function(*args, **dict(kwargs))
        unchanged = all(_same(a, b) for a, b in zip(args, before, strict=True))
        made.append((got, list(keys), list(watched_class.gathers), unchanged))
    return made
