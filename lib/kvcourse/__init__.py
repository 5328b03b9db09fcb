"""kvcourse: the library behind the course "KV-cache management: PagedAttention and Mooncake".

Modules, one job each:

* :mod:`kvcourse.specs`: model and GPU specifications (OPT-13B, LLaMA2-70B, Llama-3.1, A100...);
* :mod:`kvcourse.sizing`: KV bytes per token and request, capacity, FLOPs, read-back vs recompute;
* :mod:`kvcourse.os_paging`: a small operating-system page table for §2;
* :mod:`kvcourse.blocks.pool`, :mod:`kvcourse.blocks.table`: physical KV blocks and block tables (§4);
* :mod:`kvcourse.kv.cache`: the KV-cache interface, with contiguous and paged implementations;
* :mod:`kvcourse.attention.blockwise`: attention over a block table with an online softmax;
* :mod:`kvcourse.model`: a seeded float64 decoder that runs on any KV cache;
* :mod:`kvcourse.attention.paged_decode`: the Triton paged decode-attention kernel;
* :mod:`kvcourse.workloads`: seeded ShareGPT-like and Alpaca-like request streams;
* :mod:`kvcourse.blocks.buddy`, :mod:`kvcourse.serving`: contiguous allocation and §3's
  accounting of where the KV memory goes;
* :mod:`kvcourse.blocks.sharing`, :mod:`kvcourse.generation`: fork / copy-on-write / free and the §5
  parallel-sampling and beam-search drivers;
* :mod:`kvcourse.viz.block_tables`, :mod:`kvcourse.viz.memory`, :mod:`kvcourse.viz.sharing`,
  :mod:`kvcourse.viz.widgets`: the pages' figures and JupyterLab steppers;
* :mod:`kvcourse.attention.backend`: which attention backend runs here (compiled, interpreted, reference);
* :mod:`kvcourse.viz.tables`: computed tables for the book pages;
* :mod:`kvcourse.grading.cli`: the instructor's grading commands (``kvcourse-grade``).
"""

__version__ = "0.1.0"
