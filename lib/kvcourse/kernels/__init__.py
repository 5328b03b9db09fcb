"""Triton kernels of the course library.

The kernels live here, apart from the Python functions that check arguments and launch them
(:mod:`kvcourse.paged_attention_kernel`), so that a reader can follow a kernel from top to bottom
without wading through argument checks. Importing a module in this package imports Triton through
:func:`kvcourse.accel.load_triton` (compiled on a GPU, the interpreter on a CPU) and raises
``ImportError`` where Triton is not installed; call the public functions in
:mod:`kvcourse.paged_attention_kernel` instead, which fall back to the PyTorch reference there.
"""
