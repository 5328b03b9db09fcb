"""Request traces for prefix caching across requests (§8): Mooncake's real traces and a generator.

A trace lists, for every request, when it arrives, how long its prompt and its answer are, and the
ids of its prompt's KV blocks. The ids are *prefix-block* ids (Mooncake's chained block hashes,
remapped to small integers): block ``k`` of a request gets the same id as block ``k`` of another
request exactly when the two prompts are equal from the first token to the end of that block, so
an equal id means the KV of the whole prefix up to that block can be reused. A prompt of ``L``
tokens has ``ceil(L / block_size)`` ids; the last block may be partial, and a partial block is
shared only by identical prompts. Replaying the id lists through a cache gives the hit rates of §8.

* :func:`load_mooncake_trace` reads the traces that Kimi's Mooncake team published with their
  FAST'25 paper (``kvcourse/data/mooncake``: README, license notice, one hour of conversation
  traffic and a synthetic trace; block size 512 tokens).
* :func:`load_trace_file` reads a file of your own in the same JSON Lines format.
* :func:`synthetic_prefix_trace` draws a seeded trace with known knobs, shaped like the lecture's.

>>> trace = load_mooncake_trace("conversation")
>>> trace.num_requests, trace.block_size
(12031, 512)
"""

from __future__ import annotations

import bisect
import functools
import gzip
import json
import math
import operator
import os
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import IO

import numpy as np

from kvcourse._checks import (
    ceil_div,
    check_count,
    check_positive_int,
    check_positive_number,
    is_int,
    is_real,
)

__all__ = [
    "MOONCAKE_TRACES",
    "Trace",
    "TraceRequest",
    "load_mooncake_trace",
    "load_trace_file",
    "synthetic_prefix_trace",
]

#: The traces packaged in ``kvcourse/data/mooncake`` (names for :func:`load_mooncake_trace`).
MOONCAKE_TRACES: tuple[str, ...] = ("conversation", "synthetic")
#: Tokens per block id in Mooncake's traces.
MOONCAKE_BLOCK_SIZE = 512
_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_ARRIVAL = operator.attrgetter("arrival_s")


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: it arrives at ``arrival_s`` seconds with a ``prompt_len``-token
    prompt whose KV blocks have the prefix-block ids ``block_ids``, and generates ``output_len``
    tokens."""

    arrival_s: float
    prompt_len: int
    output_len: int
    block_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_seconds("arrival_s", self.arrival_s)
        check_count("prompt_len", self.prompt_len)
        check_count("output_len", self.output_len)
        if not isinstance(self.block_ids, tuple):
            kind = type(self.block_ids).__name__
            raise TypeError(f"block_ids must be a tuple of ints (immutable), got a {kind}")


@dataclass(frozen=True)
class Trace:
    """A named, immutable request trace: requests in arrival order, each prompt cut into
    ``block_size``-token blocks named by prefix-block ids (equal id ⇔ equal whole prefix up to and
    including that block). It is what a prefix cache, or Mooncake's KV pool, replays.

    The statistics are computed once and kept. Means of an empty trace are ``nan``.
    """

    name: str
    block_size: int
    requests: tuple[TraceRequest, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, got {self.name!r}")
        check_positive_int("block_size", self.block_size, "e.g. 512 (Mooncake's block size)")
        if not isinstance(self.requests, tuple):
            raise TypeError(f"requests must be a tuple of TraceRequest, got {self.requests!r:.80}")
        previous = -math.inf
        for i, r in enumerate(self.requests):
            if not isinstance(r, TraceRequest):
                raise TypeError(f"requests[{i}] must be a TraceRequest, got {r!r:.80}")
            if r.arrival_s < previous:
                raise ValueError(f"requests[{i}] arrives before requests[{i - 1}]: sort by arrival")
            if len(r.block_ids) != (need := ceil_div(r.prompt_len, self.block_size)):
                raise ValueError(
                    f"requests[{i}] has {len(r.block_ids)} block ids for {r.prompt_len} tokens; "
                    f"blocks of {self.block_size} tokens need {need}"
                )
            previous = r.arrival_s

    @property
    def num_requests(self) -> int:
        """How many requests the trace holds."""
        return len(self.requests)

    @property
    def duration_s(self) -> float:
        """Seconds from the first arrival to the last (0 for fewer than two requests)."""
        requests = self.requests
        return requests[-1].arrival_s - requests[0].arrival_s if len(requests) > 1 else 0.0

    @cached_property
    def mean_prompt_len(self) -> float:
        """Mean prompt length in tokens: the prefill work a cache can save part of."""
        return _mean([r.prompt_len for r in self.requests])

    @cached_property
    def mean_output_len(self) -> float:
        """Mean number of generated tokens per request."""
        return _mean([r.output_len for r in self.requests])

    @cached_property
    def num_blocks(self) -> int:
        """Block references over all requests: the blocks an infinitely large cache is asked for."""
        return sum(len(r.block_ids) for r in self.requests)

    @cached_property
    def _requests_per_block(self) -> Counter:
        counts: Counter = Counter()
        for r in self.requests:
            counts.update(set(r.block_ids))
        return counts

    @property
    def num_distinct_blocks(self) -> int:
        """Distinct block ids: the KV blocks an infinite cache ends up holding, each one computed
        once (its first reference is a miss whatever the cache)."""
        return len(self._requests_per_block)

    @cached_property
    def share_blocks_seen_once(self) -> float:
        """The fraction of *distinct* block ids that occur in exactly one request (``nan`` for a
        trace without blocks): blocks no cache can ever reuse, counted once each, so
        ``(number of ids whose requests count is 1) / num_distinct_blocks``."""
        counts = self._requests_per_block
        return sum(c == 1 for c in counts.values()) / len(counts) if counts else math.nan

    def block_id_lists(self) -> list[tuple[int, ...]]:
        """Each request's block ids, in arrival order: the input of a prefix-cache replay."""
        return [r.block_ids for r in self.requests]

    def head(self, n: int) -> Trace:
        """A trace of the first ``n`` requests (all of them if there are fewer), for a quick run."""
        n = check_count("n", n)
        return Trace(f"{self.name}[:{n}]", self.block_size, self.requests[:n])

    def window(self, start_s: float, end_s: float) -> Trace:
        """A trace of the requests arriving in ``[start_s, end_s)`` seconds, arrival times kept
        as they are (``end_s`` may be ``math.inf``)."""
        start_s, end_s = _check_seconds("start_s", start_s), _check_seconds("end_s", end_s, True)
        if end_s <= start_s:
            raise ValueError(f"end_s must be after start_s, got [{start_s:g}, {end_s:g})")
        lo = bisect.bisect_left(self.requests, start_s, key=_ARRIVAL)
        hi = bisect.bisect_left(self.requests, end_s, key=_ARRIVAL)
        name = f"{self.name}[{start_s:g}s, {end_s:g}s)"
        return Trace(name, self.block_size, self.requests[lo:hi])


# ---------------------------------------------------------------------------- loading


def load_mooncake_trace(name: str = "conversation") -> Trace:
    """One of Mooncake's published request traces (FAST'25 release, block size 512), read from the
    files packaged with the library: ``"conversation"`` (one hour of Kimi's chat traffic, 12,031
    requests) or ``"synthetic"`` (3,993 requests). Parsed once per name and then shared, which is
    safe because a :class:`Trace` is immutable."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, one of {MOONCAKE_TRACES}, got {name!r}")
    if name not in MOONCAKE_TRACES:
        raise ValueError(f"unknown Mooncake trace {name!r}; pass one of {MOONCAKE_TRACES}")
    return _load_packaged(name)


@functools.cache
def _load_packaged(name: str) -> Trace:
    resource = resources.files("kvcourse").joinpath(f"data/mooncake/{name}_trace.jsonl.gz")
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        return _parse(text, f"mooncake-{name}", MOONCAKE_BLOCK_SIZE, f"{name}_trace.jsonl.gz")


def load_trace_file(
    path: str | os.PathLike[str], *, name: str | None = None, block_size: int = MOONCAKE_BLOCK_SIZE
) -> Trace:
    """A trace of your own, read from a JSON Lines file in Mooncake's format (one request a line:
    ``timestamp`` in ms, ``input_length``, ``output_length``, ``hash_ids``), plain or gzipped.

    Every line is checked; a bad one raises ``ValueError`` naming the file, the line and what is
    wrong. ``name`` defaults to the file name without ``.jsonl``/``.gz``."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a pathlib.Path to a .jsonl file, got {path!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None (the file name), got {name!r}")
    block_size = check_positive_int("block_size", block_size, "e.g. 512 (Mooncake's block size)")
    path = os.fspath(path)
    if name is None:
        name = os.path.basename(path).removesuffix(".gz").removesuffix(".jsonl")
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    with (gzip.open if gzipped else open)(path, "rt", encoding="utf-8") as text:
        return _parse(text, name, block_size, path)


def _parse(lines: IO[str], name: str, block_size: int, source: str) -> Trace:
    requests = []
    previous_ms = -math.inf
    for number, line in enumerate(lines, start=1):
        where = f"{source}, line {number}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object with fields {_FIELDS}")
        missing = [f for f in _FIELDS if f not in row]
        if missing:
            raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
        ms, prompt_len, output_len, ids = (row[f] for f in _FIELDS)
        if not is_real(ms) or not math.isfinite(ms) or ms < 0:
            raise ValueError(f"{where}: timestamp must be milliseconds >= 0, got {ms!r}")
        if ms < previous_ms:
            raise ValueError(f"{where}: timestamps not sorted ({ms} after {previous_ms})")
        for field, value in (("input_length", prompt_len), ("output_length", output_len)):
            if not is_int(value) or value < 0:
                raise ValueError(f"{where}: {field} must be a non-negative int, got {value!r}")
        if not isinstance(ids, list) or not all(type(i) is int and i >= 0 for i in ids):
            raise ValueError(f"{where}: hash_ids must be a list of non-negative ints")
        if len(ids) != (need := ceil_div(prompt_len, block_size)):
            raise ValueError(
                f"{where}: {len(ids)} hash_ids for input_length {prompt_len}; blocks of "
                f"{block_size} tokens need ceil({prompt_len} / {block_size}) = {need}"
            )
        previous_ms = ms
        requests.append(TraceRequest(ms / 1000, prompt_len, output_len, tuple(ids)))
    return Trace(name, block_size, tuple(requests))


# ---------------------------------------------------------------------------- generator

#: Log-normal shape of the drawn lengths (context, question, answer): a coefficient of variation
#: of about 0.95, a long right tail.
_SIGMA = 0.8


def synthetic_prefix_trace(
    num_requests: int = 4157,
    *,
    duration_s: float = 1440.0,
    mean_prompt_len: float = 8709.0,
    mean_output_len: float = 183.0,
    mean_turns: float = 2.0,
    mean_question_len: float = 150.0,
    num_system_prompts: int = 4,
    system_prompt_len: int = 2000,
    think_time_s: float = 60.0,
    block_size: int = MOONCAKE_BLOCK_SIZE,
    seed: int = 0,
) -> Trace:
    """A seeded trace of multi-turn conversations, shaped like the lecture's stand-in for
    Mooncake's trace (§8.4: 4,157 requests in 24 minutes, mean input 8,709 and output 183 tokens,
    block size 512, about 56 % of the blocks seen once).

    The model: each conversation opens with one of ``num_system_prompts`` system prompts of
    ``system_prompt_len`` tokens (prompt ``k`` picked with weight ``1/k``, so a few prefixes are
    very popular), then its own context (a document, earlier chat), then a question. It lasts a
    geometric number of turns with mean ``mean_turns``; turn ``t`` sends turn ``t-1``'s prompt plus
    its answer plus a new question, so it reuses every full block of the turns before it. Context,
    question and answer lengths are log-normal (sigma 0.8); the answers' mean is
    ``mean_output_len`` and the contexts' mean is set so that the mean prompt is
    ``mean_prompt_len``. Conversations start at uniform random times, their turns an exponential
    think time (mean ``think_time_s``) apart; that fixes the *order* of the requests, and their
    arrival times are a Poisson process laid over that order (exponential gaps, scaled so the
    first arrives at 0 and the last at ``duration_s``, rounded to ms), as in Mooncake's own
    synthetic trace, which keeps the turn order within each conversation.

    Block ids follow the real traces' rule and number blocks in order of first appearance.
    ``mean_turns`` sets the reuse: 1 gives no reuse beyond the system prompts. The defaults give,
    over seeds 0–19, mean input 8,415–9,011 tokens, mean output 179–187 and a share of blocks seen
    once of 0.54–0.58 (seed 0: 8,705, 182.8 and 0.578); count and duration are exact.
    """
    n = check_positive_int("num_requests", num_requests, "e.g. 4157")
    duration_s = check_positive_number("duration_s", duration_s, " of seconds")
    mean_output_len = _at_least_one("mean_output_len", mean_output_len)
    mean_question_len = _at_least_one("mean_question_len", mean_question_len)
    mean_turns = _at_least_one("mean_turns", mean_turns)
    num_system_prompts = check_positive_int("num_system_prompts", num_system_prompts, "e.g. 4")
    system_len = check_count("system_prompt_len", system_prompt_len)
    think_time_s = check_positive_number("think_time_s", think_time_s, " of seconds")
    block_size = check_positive_int("block_size", block_size, "e.g. 512 (Mooncake's block size)")
    mean_prompt_len = check_positive_number("mean_prompt_len", mean_prompt_len, " of tokens")
    # A request of turn t carries t - 1 earlier questions and answers; over requests E[t - 1] is
    # mean_turns - 1 for geometric conversation lengths.
    per_turn = mean_question_len + mean_output_len
    mean_context = mean_prompt_len - system_len - mean_question_len - (mean_turns - 1) * per_turn
    if mean_context < 1:
        raise ValueError(
            f"mean_prompt_len={mean_prompt_len:g} leaves no room for a context after the system "
            f"prompt, the question and the earlier turns: raise it, or lower system_prompt_len, "
            f"mean_turns, mean_question_len or mean_output_len"
        )
    rng = np.random.default_rng(check_count("seed", seed))

    turns = rng.geometric(1.0 / mean_turns, size=n)  # n conversations always cover n requests
    ends = np.cumsum(turns)
    num_conv = int(np.searchsorted(ends, n)) + 1
    turns = turns[:num_conv].copy()
    turns[-1] -= int(ends[num_conv - 1]) - n  # the last conversation is cut at n requests
    first = np.concatenate([[0], np.cumsum(turns)[:-1]])  # index of each conversation's turn 1
    conv = np.repeat(np.arange(num_conv), turns)

    weights = 1.0 / np.arange(1, num_system_prompts + 1)
    system = rng.choice(num_system_prompts, size=num_conv, p=weights / weights.sum())
    context = _lognormal(rng, mean_context, num_conv)
    question = _lognormal(rng, mean_question_len, n)
    output = _lognormal(rng, mean_output_len, n)
    earlier = np.cumsum(question + output) - (question + output)  # exclusive running sum
    earlier -= np.repeat(earlier[first], turns)  # ... restarted in every conversation
    prompt_len = system_len + context[conv] + earlier + question

    gaps = rng.exponential(think_time_s, n)
    gaps[first] = 0.0
    elapsed = np.cumsum(gaps)
    order_time = np.repeat(rng.uniform(0.0, duration_s, num_conv), turns)
    order = np.argsort(order_time + elapsed - np.repeat(elapsed[first], turns), kind="stable")
    spacing = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0, n - 1))])
    arrivals = np.round(duration_s * spacing / max(spacing[-1], 1e-300), 3)

    ids: dict[tuple[int, int, int], int] = {}
    requests = []
    for slot, i in enumerate(order.tolist()):
        c, length = int(conv[i]), int(prompt_len[i])
        blocks = []
        for k in range(ceil_div(length, block_size)):
            end = (k + 1) * block_size
            # Blocks inside the system prompt are shared by every conversation that uses it; the
            # rest belong to one conversation's token stream and end where this prompt ends.
            key = (-1 - int(system[c]), k, end) if end <= system_len else (c, k, min(end, length))
            blocks.append(ids.setdefault(key, len(ids)))
        requests.append(TraceRequest(float(arrivals[slot]), length, int(output[i]), tuple(blocks)))
    return Trace(f"synthetic-prefix (seed {seed})", block_size, tuple(requests))


# ---------------------------------------------------------------------------- helpers


def _check_seconds(name: str, value: object, inf_ok: bool = False) -> float:
    if not is_real(value):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}")
    if math.isnan(value) or (math.isinf(value) and not inf_ok):
        raise ValueError(f"{name} must be a finite number of seconds, got {value!r}")
    return float(value)


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else math.nan


def _lognormal(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    mu = math.log(mean) - _SIGMA * _SIGMA / 2  # the untruncated mean is then exactly `mean`
    return np.maximum(1, np.rint(rng.lognormal(mu, _SIGMA, n))).astype(np.int64)


def _at_least_one(name: str, value: object) -> float:
    if not is_real(value):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"{name} must be a finite number >= 1, got {value!r}")
    return float(value)
