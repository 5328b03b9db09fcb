"""One prefill node, the machine every cluster model of §8.5 and §9 prices its prefill work on:
which model it serves, on how many of which GPU, at what share of their peak.

The defaults are the lecture's Exercise 8 node, stated once here: LLaMA2-70B on 8 × A800-80GB
at **60 % of peak** (312 TFLOP/s BF16 each), 1.4976 PFLOP/s sustained. A prefill's FLOPs
(:func:`~kvcourse.sizing.prefill_flops`) divided by that rate are its seconds:

>>> node = PrefillNode()
>>> node.flops_per_second / 1e15
1.4976
>>> round(node.seconds(137e9) * 1e6)  # Exercise 8: a token's 137 GFLOP in µs
91
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from kvcourse._checks import check_fraction, check_positive_int
from kvcourse.specs import A800_80GB, LLAMA2_70B, GPUSpec, ModelSpec

__all__ = ["DEFAULT_NODE", "PrefillNode"]


@dataclass(frozen=True)
class PrefillNode:
    """A prefill node: ``model`` served on ``num_gpus`` × ``gpu`` running at ``utilization``
    (a fraction in (0, 1]) of their peak. Checked on construction."""

    model: ModelSpec = LLAMA2_70B
    gpu: GPUSpec = A800_80GB
    num_gpus: int = 8
    utilization: float = 0.6

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise TypeError(
                f"model must be a ModelSpec (e.g. kvcourse.specs.LLAMA2_70B), got {self.model!r}"
            )
        if not isinstance(self.gpu, GPUSpec):
            raise TypeError(
                f"gpu must be a GPUSpec (e.g. kvcourse.specs.A800_80GB), got {self.gpu!r}"
            )
        check_positive_int("num_gpus", self.num_gpus, "e.g. 8")
        check_fraction("utilization", self.utilization)

    @cached_property
    def flops_per_second(self) -> float:
        """The node's sustained FLOP/s: ``num_gpus × peak × utilization``."""
        return self.num_gpus * self.gpu.peak_flops * self.utilization

    @property
    def memory_bytes(self) -> int:
        """GPU memory of the whole node: ``num_gpus × gpu.memory_bytes`` (8 × A800-80GB:
        0.64 TB)."""
        return self.num_gpus * self.gpu.memory_bytes

    def seconds(self, flops: float) -> float:
        """Seconds the node takes for ``flops`` floating-point operations (zero or more)."""
        try:
            finite = 0 <= flops < math.inf  # the common case checked fast: a simulator's hot path
        except TypeError:
            finite = False
        if not finite or isinstance(flops, bool):
            raise ValueError(f"flops must be a finite number >= 0, got {flops!r}")
        return flops / self.flops_per_second


#: The lecture's node (Exercise 8), the default of every function and record of the cluster layer.
DEFAULT_NODE = PrefillNode()
