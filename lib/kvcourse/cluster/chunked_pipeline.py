"""Chunked pipeline parallelism (Mooncake §5.1, "CPP"; §9 of the book): prefilling one long
prompt on several prefill nodes at once.

``num_stages`` prefill nodes form a pipeline, each holding ``num_layers / num_stages`` of the
model's layers (and the KV of those layers). The prompt is cut into chunks of ``chunk_len``
tokens. Chunk ``c`` runs on stage ``s`` once

* chunk ``c`` has finished stage ``s − 1`` and its activations have crossed to stage ``s``, and
* chunk ``c − 1`` has finished stage ``s`` — causality: chunk ``c`` attends to the earlier
  chunks' KV of the same layers, which lives on that stage.

A chunk's time on one stage is ``prefill_flops(model, chunk, cached=earlier chunks) /
num_stages`` on one node (8 × A800-80GB at **60 % of peak**, the lecture's Exercise 8 constant),
so later chunks, which attend to more context, cost more; the output head is spread evenly over
the stages, a simplification. Crossing a stage boundary costs ``chunk × hidden × 2`` bytes of
activations over an RDMA link (100 GB/s by default, ``link_bandwidth=None`` for free), taken as
a delay that does not hold up the sending stage.

A 128K-token LLaMA2-70B prompt on 4 nodes in 4,096-token chunks: 27.1 s on one node, ≈7.7 s on
the pipeline (≈3.5×, the rest lost to filling and draining the pipeline with the dearest,
last chunks). A prompt that fits in one chunk runs the stages one after the other: it gains
nothing and loses only the boundary crossings.

>>> plan = chunked_pipeline(131_072, 4, 4096)
>>> round(plan.single_node_s, 1), round(plan.total_s, 1), round(plan.speedup, 1)
(27.1, 7.7, 3.5)
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcourse._checks import check_positive_int, check_positive_number
from kvcourse.cluster.prefill_node import DEFAULT_NODE, PrefillNode
from kvcourse.sizing import prefill_flops, transfer_seconds

__all__ = [
    "PipelineSchedule",
    "PipelineSlot",
    "chunk_lengths",
    "chunked_pipeline",
]


@dataclass(frozen=True)
class PipelineSlot:
    """Chunk ``chunk`` (0-based) of the prompt running on pipeline stage ``stage`` (0-based)
    from ``start_s`` to ``end_s`` seconds after the prefill began."""

    chunk: int
    stage: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class PipelineSchedule:
    """A chunked-pipeline prefill of one prompt: every (chunk, stage) slot, ``total_s`` (when
    the last chunk leaves the last stage), ``single_node_s`` (the same prefill on one node) and
    ``hop_s``, the boundary crossing of one full chunk's activations."""

    model: str
    prompt_len: int
    chunk_len: int
    num_stages: int
    slots: tuple[PipelineSlot, ...]
    total_s: float
    single_node_s: float
    hop_s: float

    @property
    def num_chunks(self) -> int:
        """How many chunks the prompt was cut into."""
        return max(s.chunk for s in self.slots) + 1

    @property
    def speedup(self) -> float:
        """``single_node_s / total_s``: how much sooner the pipeline finishes the prefill."""
        return self.single_node_s / self.total_s


def chunk_lengths(prompt_len: int, chunk_len: int) -> list[int]:
    """The lengths of the chunks a ``prompt_len``-token prompt is cut into: full ``chunk_len``
    chunks and a shorter last one:

    >>> chunk_lengths(10_000, 4096)
    [4096, 4096, 1808]
    """
    prompt_len = check_positive_int("prompt_len", prompt_len, "e.g. 131072")
    chunk_len = check_positive_int("chunk_len", chunk_len, "e.g. 4096")
    full, rest = divmod(prompt_len, chunk_len)
    return [chunk_len] * full + ([rest] if rest else [])


def chunked_pipeline(
    prompt_len: int,
    num_stages: int = 4,
    chunk_len: int = 4096,
    *,
    node: PrefillNode = DEFAULT_NODE,
    link_bandwidth: float | None = 100e9,
) -> PipelineSchedule:
    """Schedule the prefill of a ``prompt_len``-token prompt on a pipeline of ``num_stages``
    prefill nodes, each a ``node`` (by default LLaMA2-70B on 8 × A800 at 60 % of peak), in chunks
    of ``chunk_len`` tokens, with activations crossing stages over ``link_bandwidth`` bytes/s
    (None: free); see the module docstring for the rules. The model's ``num_layers`` must divide
    evenly among the stages (LLaMA2-70B's 80 layers: 1, 2, 4, 5, 8, … stages)."""
    if not isinstance(node, PrefillNode):
        raise TypeError(f"node must be a kvcourse.cluster.PrefillNode, got {node!r}")
    model = node.model
    num_stages = check_positive_int("num_stages", num_stages, "e.g. 4")
    if model.num_layers % num_stages:
        raise ValueError(
            f"{model.name}'s {model.num_layers} layers do not split evenly into {num_stages} "
            f"stages; pass a num_stages that divides {model.num_layers}"
        )
    if link_bandwidth is not None:
        link_bandwidth = check_positive_number("link_bandwidth", link_bandwidth, " (bytes/s)")
    lengths = chunk_lengths(prompt_len, chunk_len)
    seconds = node.seconds

    def hop(tokens: int) -> float:
        if link_bandwidth is None:
            return 0.0
        return transfer_seconds(tokens * model.hidden_size * 2, link_bandwidth)

    slots = []
    stage_free = [0.0] * num_stages  # when chunk c - 1 left each stage
    done = 0
    for c, length in enumerate(lengths):
        per_stage = seconds(prefill_flops(model, length, done)) / num_stages
        arrived = 0.0  # when chunk c's activations reach the current stage
        for s in range(num_stages):
            start = max(arrived, stage_free[s])
            stage_free[s] = end = start + per_stage
            slots.append(PipelineSlot(c, s, start, end))
            arrived = end + hop(length)
        done += length
    return PipelineSchedule(
        model=model.name,
        prompt_len=prompt_len,
        chunk_len=chunk_len,
        num_stages=num_stages,
        slots=tuple(slots),
        total_s=stage_free[-1],
        single_node_s=seconds(prefill_flops(model, prompt_len)),
        hop_s=hop(min(chunk_len, prompt_len)),
    )
