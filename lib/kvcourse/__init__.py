"""kvcourse: the library behind the course "KV-cache management: PagedAttention and Mooncake".

It is a stack of layers; a module imports only from its own layer or the ones below
(:mod:`kvcourse.layers` lists them, and the tests hold the library to it):

* foundations: :mod:`kvcourse.specs` (model and GPU specifications), :mod:`kvcourse.sizing` (KV
  bytes, capacity, FLOPs), :mod:`kvcourse.kv_formats` (§10: KV bytes under other attention
  layouts and number formats, sink + window eviction), :mod:`kvcourse.workloads` (seeded request
  streams), :mod:`kvcourse.token_workloads` (seeded request streams with token ids, for
  comparing prefix caches token by token),
  :mod:`kvcourse.traces` (Mooncake's request traces with prefix-block ids, and a generator),
  :mod:`kvcourse.os_paging` (§2's toy page table) and the shared argument checks;
* :mod:`kvcourse.blocks`: block bookkeeping with no tensors: the block pool, block tables, sharing
  with copy-on-write, the buddy allocator, the
  block-aligned prefix cache and the token-granular radix tree beside it;
* :mod:`kvcourse.kv`: the K and V tensors behind those ids (contiguous, paged, sharing caches);
* :mod:`kvcourse.attention`: contiguous and blockwise attention, the Triton paged decode kernel
  and the backend that picks how it runs;
* :mod:`kvcourse.model`: a seeded tiny transformer that runs on any KV cache;
* :mod:`kvcourse.generation`: parallel sampling and beam search on shared blocks;
* :mod:`kvcourse.serving`: the iteration cost model, memory schemes, the serving loop and the 2023
  vLLM paper's preemption (and vLLM v1's memory beside it), and the simulations of §3, §6 and §7;
* :mod:`kvcourse.cluster`: Mooncake's side (§8.4 to §9): a cluster-wide prefix cache replayed over
  traces, storage tiers, layer-wise and chunked prefill, the Conductor's placements, and overload
  with its rejection rules;
* :mod:`kvcourse.viz`: the book's figures, tables and JupyterLab steppers;
* :mod:`kvcourse.assignment_checks`: what the assignments' test cells call.

The instructor's grader (``kvcourse-grade``) is a package of its own, ``kvcourse_grader`` in
``grading/``; students never get it.
"""

__version__ = "0.1.0"
