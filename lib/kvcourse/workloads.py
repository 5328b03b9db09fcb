"""Seeded synthetic request workloads shaped like the vLLM paper's two traces (§3, §4, §6, §7).

The vLLM paper (Kwon et al., SOSP 2023, §6.1 and Fig. 11) serves two datasets:

* **ShareGPT** (conversations people shared from ChatGPT): long prompts and long answers, mean
  input 161 tokens and mean output 338 tokens;
* **Alpaca** (instructions written by a model): short ones, mean input 19 and output 58 tokens.

The traces themselves are not needed for memory accounting: what matters is the distribution of
prompt and output lengths, and when requests arrive. This module draws both from a seed.

**Lengths.** Prompt and output lengths are drawn independently from log-normal distributions (a
long right tail, like the paper's Fig. 11 histograms) whose *untruncated* means are the paper's
means: ``exp(mu + sigma²/2) = mean``, so ``mu = ln(mean) − sigma²/2``. Both presets use
``sigma = 0.8`` (a coefficient of variation of about 0.95, close to an exponential's 1, but
without its pile-up of near-empty requests). Each draw is rounded to the nearest integer and
raised to at least 1 token. Then every request is **clipped to the model's context**,
``max_total = 2048`` tokens by default (OPT's limit): the prompt to at most ``max_total − 1``
tokens, the output to at most ``max_total − prompt``. Clipping trims the tail, so the realised
means are a little below the nominal ones. For 100,000 requests from seed 0:

=============  ==============  ==============  =============
preset         mean prompt     mean output     mean total
=============  ==============  ==============  =============
ShareGPT-like  160.8 (161)     335.0 (338)     495.8
Alpaca-like    19.0 (19)       58.1 (58)       77.1
=============  ==============  ==============  =============

(A sample of 10,000 stays within 3 % of these means; :data:`SHAREGPT` and :data:`ALPACA` hold the
parameters.)

**Arrivals.** :func:`poisson_arrivals` draws a Poisson process: exponential inter-arrival gaps
with mean ``1 / rate`` seconds, starting the clock at 0.

**Seeds.** One seed gives one workload, every time, on every machine with the same NumPy
(``numpy.random.default_rng``). Lengths and arrival times come from two independent streams of
the seed, so changing the request rate moves the arrival times but keeps every request's lengths.

>>> reqs = sharegpt_like(3, rate=2.0, seed=1)
>>> [r.request_id for r in reqs], all(r.total_len <= 2048 for r in reqs)
([0, 1, 2], True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvcourse._checks import check_count, check_positive_number, is_int, is_real

__all__ = [
    "ALPACA",
    "SHAREGPT",
    "LengthDistribution",
    "Request",
    "WorkloadStats",
    "alpaca_like",
    "generate_requests",
    "poisson_arrivals",
    "sample_lengths",
    "sharegpt_like",
    "summarize",
]

# Stream numbers under one seed: lengths and arrivals never share random numbers.
_LENGTH_STREAM = 0
_ARRIVAL_STREAM = 1


@dataclass(frozen=True)
class Request:
    """One request of a workload: it arrives at ``arrival_s`` seconds with a ``prompt_len``-token
    prompt and will generate ``output_len`` tokens (unknown to a real server until EOS)."""

    request_id: int
    arrival_s: float
    prompt_len: int
    output_len: int

    @property
    def total_len(self) -> int:
        """Tokens whose KV the request holds when it finishes: prompt plus output."""
        return self.prompt_len + self.output_len


@dataclass(frozen=True)
class LengthDistribution:
    """How prompt and output lengths are drawn: log-normal with these untruncated means and
    shape parameters, then clipped so that prompt + output ≤ ``max_total`` (see the module
    docstring)."""

    name: str
    mean_prompt: float
    mean_output: float
    sigma_prompt: float = 0.8
    sigma_output: float = 0.8
    max_total: int = 2048

    def __post_init__(self) -> None:
        for field in ("mean_prompt", "mean_output"):
            value = getattr(self, field)
            if not is_real(value) or not math.isfinite(value) or value < 1:
                raise ValueError(
                    f"LengthDistribution {self.name!r}: {field} must be a finite number of "
                    f"tokens >= 1, got {value!r}"
                )
        for field in ("sigma_prompt", "sigma_output"):
            value = getattr(self, field)
            if not is_real(value) or not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"LengthDistribution {self.name!r}: {field} must be a finite number >= 0 "
                    f"(0 makes every length equal to the mean), got {value!r}"
                )
        if not is_int(self.max_total) or self.max_total < 2:
            raise ValueError(
                f"LengthDistribution {self.name!r}: max_total must be an int >= 2 (one prompt "
                f"token and one output token), got {self.max_total!r}"
            )


#: ShareGPT-like lengths (vLLM paper: mean input 161, mean output 338 tokens).
SHAREGPT = LengthDistribution("ShareGPT-like", mean_prompt=161, mean_output=338)
#: Alpaca-like lengths (vLLM paper: mean input 19, mean output 58 tokens).
ALPACA = LengthDistribution("Alpaca-like", mean_prompt=19, mean_output=58)


@dataclass(frozen=True)
class WorkloadStats:
    """Means and extremes of a list of requests (what a page reports as "what we got")."""

    num_requests: int
    mean_prompt: float
    mean_output: float
    mean_total: float
    max_total: int
    duration_s: float

    @property
    def rate(self) -> float:
        """Requests per second over the arrival span (``nan`` if they all arrive at once)."""
        if self.num_requests < 2 or self.duration_s <= 0:
            return math.nan
        return (self.num_requests - 1) / self.duration_s


# ---------------------------------------------------------------------------- generators


def sample_lengths(
    num_requests: int, dist: LengthDistribution = SHAREGPT, *, seed: int = 0
) -> list[tuple[int, int]]:
    """``num_requests`` pairs ``(prompt_len, output_len)`` drawn from ``dist`` with ``seed``.

    Every pair satisfies ``prompt_len >= 1``, ``output_len >= 1`` and
    ``prompt_len + output_len <= dist.max_total``.
    """
    num_requests = check_count("num_requests", num_requests)
    if not isinstance(dist, LengthDistribution):
        raise TypeError(
            f"dist must be a LengthDistribution such as SHAREGPT or ALPACA, got {dist!r}"
        )
    rng = _rng(seed, _LENGTH_STREAM)
    prompt = _lognormal_lengths(rng, dist.mean_prompt, dist.sigma_prompt, num_requests)
    output = _lognormal_lengths(rng, dist.mean_output, dist.sigma_output, num_requests)
    prompt = np.minimum(prompt, dist.max_total - 1)
    output = np.minimum(output, dist.max_total - prompt)
    return [(int(p), int(o)) for p, o in zip(prompt, output, strict=True)]


def poisson_arrivals(
    num_requests: int, rate: float, *, seed: int = 0, start_s: float = 0.0
) -> list[float]:
    """Arrival times (seconds, increasing) of ``num_requests`` requests of a Poisson process with
    ``rate`` requests per second: independent exponential gaps of mean ``1 / rate``. The first
    request arrives one gap after ``start_s``."""
    num_requests = check_count("num_requests", num_requests)
    rate = _check_rate(rate)
    if not is_real(start_s) or not math.isfinite(start_s):
        raise ValueError(f"start_s must be a finite number of seconds, got {start_s!r}")
    gaps = _rng(seed, _ARRIVAL_STREAM).exponential(1.0 / rate, num_requests)
    return [float(t) for t in float(start_s) + np.cumsum(gaps)]


def generate_requests(
    num_requests: int,
    dist: LengthDistribution = SHAREGPT,
    *,
    rate: float | None = None,
    seed: int = 0,
) -> list[Request]:
    """A seeded workload: lengths from ``dist``, Poisson arrivals at ``rate`` requests per second,
    or every request at time 0 when ``rate`` is ``None`` (an offline batch). Request ids are
    ``0 .. num_requests − 1`` in arrival order."""
    lengths = sample_lengths(num_requests, dist, seed=seed)
    if rate is None:
        arrivals = [0.0] * len(lengths)
    else:
        arrivals = poisson_arrivals(num_requests, rate, seed=seed)
    return [
        Request(i, t, p, o) for i, (t, (p, o)) in enumerate(zip(arrivals, lengths, strict=True))
    ]


def sharegpt_like(num_requests: int, *, rate: float | None = None, seed: int = 0) -> list[Request]:
    """:func:`generate_requests` with :data:`SHAREGPT` lengths."""
    return generate_requests(num_requests, SHAREGPT, rate=rate, seed=seed)


def alpaca_like(num_requests: int, *, rate: float | None = None, seed: int = 0) -> list[Request]:
    """:func:`generate_requests` with :data:`ALPACA` lengths."""
    return generate_requests(num_requests, ALPACA, rate=rate, seed=seed)


def summarize(requests: Sequence[Request]) -> WorkloadStats:
    """Mean prompt, output and total lengths, the longest request and the arrival span."""
    if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or not requests:
        raise ValueError(f"requests must be a non-empty list of Request, got {requests!r}")
    if not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests must contain only Request records")
    n = len(requests)
    arrivals = [r.arrival_s for r in requests]
    return WorkloadStats(
        num_requests=n,
        mean_prompt=sum(r.prompt_len for r in requests) / n,
        mean_output=sum(r.output_len for r in requests) / n,
        mean_total=sum(r.total_len for r in requests) / n,
        max_total=max(r.total_len for r in requests),
        duration_s=max(arrivals) - min(arrivals),
    )


# ---------------------------------------------------------------------------- helpers


def _lognormal_lengths(rng: np.random.Generator, mean: float, sigma: float, n: int) -> np.ndarray:
    mu = math.log(mean) - sigma * sigma / 2  # the untruncated mean is then exactly `mean`
    return np.maximum(1, np.rint(rng.lognormal(mu, sigma, n))).astype(np.int64)


def _rng(seed: object, stream: int) -> np.random.Generator:
    return np.random.default_rng([check_count("seed", seed), stream])


def _check_rate(rate: object) -> float:
    return check_positive_number("rate", rate, " of requests per second")
