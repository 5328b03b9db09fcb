"""Which attention backend runs on this machine.

The course's paged-attention kernel is written in Triton. Three situations are possible:

* ``"triton-gpu"``: Triton is installed and a CUDA GPU is visible, so the kernel runs compiled;
* ``"triton-interpreter"``: Triton is installed but there is no GPU (a laptop, CI), so the same
  kernel runs in Triton's interpreter, which needs ``TRITON_INTERPRET=1`` in the environment
  *before* ``triton`` is first imported;
* ``"reference"``: Triton is not installed (it publishes wheels for Linux only), so the library uses
  its reference attention written in PyTorch and prints a one-line notice saying so.

Import Triton only through :func:`load_triton`, which sets the interpreter flag when it is needed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

BackendName = Literal["triton-gpu", "triton-interpreter", "reference"]


@dataclass(frozen=True)
class Backend:
    """The attention backend chosen for this process and the reason, in one sentence."""

    name: BackendName
    reason: str

    @property
    def uses_triton(self) -> bool:
        """True when the Triton kernel (compiled or interpreted) is the one that runs."""
        return self.name != "reference"


_notice_shown = False


def _gpu_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a hard dependency
        return False
    return bool(torch.cuda.is_available())


def _interpreter_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip() not in ("", "0")


def detect_backend() -> Backend:
    """Decide which backend runs here, without importing Triton.

    ``TRITON_INTERPRET=1`` set by the user forces the interpreter even on a GPU (useful for
    debugging a kernel with ``print`` and breakpoints).
    """
    if importlib.util.find_spec("triton") is None:
        return Backend(
            "reference",
            f"Triton is not installed on {platform.system() or 'this system'} "
            "(it ships for Linux only); using the PyTorch reference attention instead",
        )
    if _interpreter_requested():
        return Backend("triton-interpreter", "TRITON_INTERPRET=1 is set")
    if _gpu_available():
        return Backend("triton-gpu", "a CUDA GPU is available, so the kernel runs compiled")
    return Backend(
        "triton-interpreter", "no CUDA GPU is visible, so the kernel runs in Triton's interpreter"
    )


def kernel_device() -> str:
    """Where the tensors given to the paged-attention kernel should live here: ``"cuda"`` when it
    runs compiled on a GPU, ``"cpu"`` for the interpreter and the reference."""
    return "cuda" if detect_backend().name == "triton-gpu" else "cpu"


def load_triton() -> ModuleType | None:
    """Import and return ``triton`` set up for this machine, or ``None`` where it is not installed.

    On a machine without a GPU this sets ``TRITON_INTERPRET=1`` before the first import, so kernels
    run in the interpreter. Where Triton is missing it prints, once per process, a one-line notice
    that the reference attention is used instead. Raises ``RuntimeError`` if Triton was already
    imported in compiled mode on a machine without a GPU, since the mode cannot change afterwards.
    """
    global _notice_shown
    backend = detect_backend()
    if not backend.uses_triton:
        if not _notice_shown:
            print(f"kvcourse: {backend.reason}.", file=sys.stderr)
            _notice_shown = True
        return None
    if backend.name == "triton-interpreter" and not _interpreter_requested():
        if "triton" in sys.modules:
            raise RuntimeError(
                "triton was imported before kvcourse could enable its interpreter, and this "
                "machine has no GPU. Restart the kernel and import kvcourse before triton, or "
                "set TRITON_INTERPRET=1 in the environment before starting Python."
            )
        os.environ["TRITON_INTERPRET"] = "1"
    return importlib.import_module("triton")
