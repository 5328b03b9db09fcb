"""How long one serving iteration takes (§3.3): the book's roofline model of iteration time.

Every iteration of the serving loop reads the model's weights and the KV of every running request
from GPU memory, and runs its new tokens (whole prompts for prefills, one token per decode) through
the model. Whichever of the two takes longer sets the iteration's duration:

``seconds = max(weights_s + per_context_token_s × stored tokens, per_new_token_s × new tokens)``

:meth:`IterationCost.for_gpu` derives the three constants from a model's sizes
(:mod:`kvcourse.sizing`) and a GPU's data sheet (:mod:`kvcourse.specs`) at stated efficiencies;
for OPT-13B on an A100-40GB a decode iteration over a full KV cache takes ≈ 38.6 ms. This is the one
place the course computes iteration time: the scheduler (:mod:`kvcourse.serving.scheduler`)
advances its clock by :meth:`IterationCost.seconds` of each iteration's work.

The two efficiencies are the book's, stated once on §1 ("One model of iteration time") and used by
every page that times a step: a decode step reaches 0.6 of the data-sheet bandwidth (many kernels
per layer, each with its start-up cost, but the weights stream in large pieces), and a prefill 0.5
of peak FLOP/s (large matrix products come near peak; attention, normalisations and short prompts
do not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvcourse.sizing import flops_per_token, kv_bytes_per_token, weight_bytes
from kvcourse.specs import A100_40GB, OPT_13B, GPUSpec, ModelSpec

__all__ = ["IterationCost", "check_cost"]


@dataclass(frozen=True)
class IterationCost:
    """How long one iteration takes: a roofline of memory time and compute time.

    ``seconds = max(weights_s + per_context_token_s × stored tokens, per_new_token_s × new tokens)``

    where *stored tokens* is the KV the iteration reads (every running request's context) and
    *new tokens* the tokens it runs through the model (whole prompts for prefills, one per decode).
    """

    weights_s: float
    per_context_token_s: float
    per_new_token_s: float

    def __post_init__(self) -> None:
        for name in ("weights_s", "per_context_token_s", "per_new_token_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"IterationCost.{name} must be a number of seconds, got {value!r}")
            if not math.isfinite(value) or value < 0 or (name == "weights_s" and value == 0):
                raise ValueError(
                    f"IterationCost.{name} must be finite and non-negative (weights_s positive), "
                    f"got {value!r}"
                )

    @classmethod
    def for_gpu(
        cls,
        model: ModelSpec = OPT_13B,
        gpu: GPUSpec = A100_40GB,
        *,
        bandwidth_efficiency: float = 0.6,
        compute_efficiency: float = 0.5,
    ) -> IterationCost:
        """The roofline constants of ``model`` on ``gpu``: the weights and each token's KV are read
        at ``bandwidth_efficiency`` of the memory bandwidth, each new token costs
        :func:`~kvcourse.sizing.flops_per_token` at ``compute_efficiency`` of peak.

        OPT-13B on an A100-40GB: 27.5 ms to read the weights, 0.88 µs per stored token, 0.165 ms
        per new token — a decode iteration over a full KV cache (12,596 tokens) takes ≈ 38.6 ms.
        """
        for name, value in (
            ("bandwidth_efficiency", bandwidth_efficiency),
            ("compute_efficiency", compute_efficiency),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a fraction in (0, 1], got {value!r}")
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}")
        bandwidth = gpu.memory_bandwidth * bandwidth_efficiency
        return cls(
            weights_s=weight_bytes(model) / bandwidth,
            per_context_token_s=kv_bytes_per_token(model) / bandwidth,
            per_new_token_s=flops_per_token(model) / (gpu.peak_flops * compute_efficiency),
        )

    def seconds(self, stored_tokens: int, new_tokens: int) -> float:
        """Duration of an iteration that reads ``stored_tokens`` tokens of KV and runs
        ``new_tokens`` tokens through the model."""
        memory = self.weights_s + self.per_context_token_s * stored_tokens
        return max(memory, self.per_new_token_s * new_tokens)


def check_cost(cost: object) -> IterationCost:
    """``cost`` if it is an :class:`IterationCost`, OPT-13B on an A100-40GB
    (:meth:`IterationCost.for_gpu`) if it is None; TypeError otherwise."""
    if cost is None:
        return IterationCost.for_gpu()
    if not isinstance(cost, IterationCost):
        raise TypeError(f"cost must be an IterationCost, got {cost!r}")
    return cost
