"""kvcourse: the library behind the course "KV-cache management: PagedAttention and Mooncake".

Modules, one job each:

* :mod:`kvcourse.models`: model and GPU specifications (OPT-13B, LLaMA2-70B, Llama-3.1, A100...);
* :mod:`kvcourse.sizing`: KV bytes per token and request, capacity, FLOPs, read-back vs recompute;
* :mod:`kvcourse.pagetable`: a small operating-system page table for §2;
* :mod:`kvcourse.block_pool`, :mod:`kvcourse.block_table`: physical KV blocks and block tables (§4);
* :mod:`kvcourse.kv_cache`: the KV-cache interface, with contiguous and paged implementations;
* :mod:`kvcourse.blockwise_attention`: attention over a block table with an online softmax;
* :mod:`kvcourse.tiny_transformer`: a seeded float64 decoder that runs on any KV cache;
* :mod:`kvcourse.paged_attention_kernel`: the Triton paged decode-attention kernel;
* :mod:`kvcourse.workloads`: seeded ShareGPT-like and Alpaca-like request streams;
* :mod:`kvcourse.buddy`, :mod:`kvcourse.memory_accounting`: contiguous allocation and §3's
  accounting of where the KV memory goes;
* :mod:`kvcourse.sharing`, :mod:`kvcourse.decoding`: fork / copy-on-write / free and the §5
  parallel-sampling and beam-search drivers;
* :mod:`kvcourse.plots`, :mod:`kvcourse.plots_memory`, :mod:`kvcourse.plots_sharing`,
  :mod:`kvcourse.widgets`: the pages' figures and JupyterLab steppers;
* :mod:`kvcourse.accel`: which attention backend runs here (compiled, interpreted, reference);
* :mod:`kvcourse.display`: computed tables for the book pages;
* :mod:`kvcourse.grading_cli`: the instructor's grading commands (``kvcourse-grade``).
"""

__version__ = "0.1.0"
