"""Student kernels in a sandbox: while nbgrader grades a submission, the kernel that runs the
student's code sees no course sources, no gradebook and no other student's work, writes only its
own submission folder, and has no network.

The sandbox is bubblewrap (``bwrap``, Debian's ``bubblewrap`` package), an existing, audited tool:
the kernel runs in new mount, PID, network, IPC and UTS namespaces, the whole file system mounted
read-only, with empty read-only folders over the course's ``solutions/``, ``grading/`` (gradebook,
submissions, samples), ``tests/`` and ``.git`` (whose history holds the solutions too), its own
working folder bound back writable, and a private home and temporary folder. nbgrader itself
stays outside the sandbox and keeps the gradebook.

The kernel talks to nbgrader over ZeroMQ *IPC* sockets (Unix sockets in a private folder bound
into the sandbox) instead of TCP on loopback, since a network namespace cuts loopback too; and it
is interrupted by an ``interrupt_request`` message rather than a signal, since a signal sent to
the sandbox would stop bubblewrap with it. Time and memory limits stay those of
:mod:`kvcourse_grader.runner`: the kernel inherits them.

``kvcourse-grade autograde`` uses :class:`SandboxedKernelManager` for every kernel; where
bubblewrap is missing or cannot create namespaces (:func:`sandbox_problem` says why) it refuses to
grade unless told ``--unsandboxed``, and then says loudly that it grades without a sandbox.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from traitlets import List, Unicode

__all__ = [
    "HIDDEN_FOLDERS",
    "SANDBOX_CLASS",
    "SandboxedKernelManager",
    "bwrap_binary",
    "sandbox_args",
    "sandbox_problem",
]

#: The folders of the course (relative to its root) a student's kernel must not see.
HIDDEN_FOLDERS = ("solutions", "grading", "tests", ".git")

#: The dotted name nbgrader is given for the kernel manager.
SANDBOX_CLASS = "kvcourse_grader.sandbox.SandboxedKernelManager"

#: Environment variable naming the bubblewrap binary (default: ``bwrap`` on the PATH).
BWRAP_ENV = "KVCOURSE_BWRAP"


def bwrap_binary() -> str | None:
    """The bubblewrap binary to use: ``$KVCOURSE_BWRAP`` if set, else ``bwrap`` on the PATH (None
    when there is none)."""
    chosen = os.environ.get(BWRAP_ENV)
    if chosen:
        return chosen if Path(chosen).is_file() and os.access(chosen, os.X_OK) else None
    return shutil.which("bwrap")


def sandbox_problem() -> str | None:
    """None when student kernels can be sandboxed here; otherwise why not, and what to do."""
    binary = bwrap_binary()
    if binary is None:
        return (
            "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: "
            "`apt-get install bubblewrap`) to grade in a sandbox"
        )
    probe = [binary, *_namespaces(), "--ro-bind", "/", "/", "--", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"bubblewrap ({binary}) could not run: {err}"
    if result.returncode != 0:
        why = result.stderr.strip() or f"exit status {result.returncode}"
        return f"bubblewrap ({binary}) cannot create its namespaces here: {why}"
    return None


def _namespaces() -> list[str]:
    return ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]


def sandbox_args(
    course_root: Path, workdir: Path, channel_dir: Path, extra_hidden: tuple[str, ...] = ()
) -> list[str]:
    """The bubblewrap arguments (binary first, up to ``--``) that run a kernel with ``workdir``
    as its only writable folder, ``channel_dir`` for its sockets, and the course's hidden folders
    (and ``extra_hidden``) empty."""
    binary = bwrap_binary()
    if binary is None:
        raise RuntimeError(sandbox_problem() or "bubblewrap is missing")
    args = [binary, *_namespaces(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args += ["--bind", str(channel_dir), str(channel_dir)]
    hidden = [course_root / name for name in HIDDEN_FOLDERS if (course_root / name).exists()]
    hidden += [Path(folder) for folder in extra_hidden]
    for folder in hidden:
        args += ["--tmpfs", str(folder)]
    args += ["--bind", str(workdir), str(workdir)]
    for folder in hidden:  # empty and read-only, around the writable workdir if it lies inside
        args += ["--remount-ro", str(folder)]
    # A private home, temporary folder and caches beside the sockets; the parent's pid means
    # nothing in a new PID namespace (ipykernel would take its parent for dead), and bubblewrap
    # ends the kernel with its parent anyway.
    private = channel_dir / "home"
    args += ["--chdir", str(workdir)]
    for name in ("HOME", "TMPDIR", "MPLCONFIGDIR", "IPYTHONDIR"):
        args += ["--setenv", name, str(private / name.lower())]
    args += ["--unsetenv", "JPY_PARENT_PID", "--"]
    return args


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in the bubblewrap sandbox (module docstring): IPC
    sockets in a private folder, message-based interrupts, the course's hidden folders empty,
    only the notebook's own folder writable."""

    course_root = Unicode(
        "",
        help="The course repository's root (default: the nearest folder above the working "
        "folder that holds grading/nbgrader_config.py).",
    ).tag(config=True)

    extra_hidden = List(
        Unicode(), [], help="More folders the kernel must not see (absolute paths)."
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Only whether bwrap exists: autograde has probed its namespaces once for the whole run,
        # and a kernel that bwrap cannot start fails with bwrap's own message.
        if bwrap_binary() is None:
            raise RuntimeError(
                f"cannot sandbox the student's kernel: {sandbox_problem()}; or grade with "
                "`kvcourse-grade autograde --unsandboxed` (no protection of the course sources)"
            )
        self._channels = Path(tempfile.mkdtemp(prefix="kvcourse-kernel-"))
        for name in ("home", "tmpdir", "mplconfigdir", "ipythondir"):
            (self._channels / "home" / name).mkdir(parents=True, exist_ok=True)
        self.transport = "ipc"
        self.ip = str(self._channels / "kernel")
        self.connection_file = str(self._channels / "connection.json")

    def _root(self, workdir: Path) -> Path:
        if self.course_root:
            return Path(self.course_root).resolve()
        from kvcourse_grader.runner import find_course_root

        return find_course_root(workdir)

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        assert self.kernel_spec is not None
        self.kernel_spec.interrupt_mode = "message"  # a signal would stop bubblewrap itself
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        box = sandbox_args(self._root(workdir), workdir, self._channels, tuple(self.extra_hidden))
        return [*box, *cmd], kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """jupyter_client's cleanup, then the socket folder with the connection file."""
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._channels, ignore_errors=True)
