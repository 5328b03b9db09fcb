"""kvcourse: the library behind the course "KV-cache management: PagedAttention and Mooncake".

Modules, one job each:

* :mod:`kvcourse.models`: model and GPU specifications (OPT-13B, LLaMA2-70B, Llama-3.1, A100, ...);
* :mod:`kvcourse.sizing`: KV bytes per token and request, capacity, FLOPs, read-back vs recompute;
* :mod:`kvcourse.pagetable`: a small operating-system page table for §2;
* :mod:`kvcourse.accel`: which attention backend runs here (compiled Triton, interpreter, reference);
* :mod:`kvcourse.grading_cli`: the instructor's grading commands (``kvcourse-grade``).
"""

__version__ = "0.1.0"
