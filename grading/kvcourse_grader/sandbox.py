"""Student kernels in a sandbox: while nbgrader grades a submission, the kernel that runs the
student's code sees the Python runtime, the installed packages and the course library (all
read-only), its own submission folder (writable), a private home and temporary folder, and nothing
else of the file system; it has no network and no other process in sight.

The sandbox is bubblewrap (``bwrap``, Debian's ``bubblewrap`` package), an existing, audited tool.
The kernel runs in new mount, PID, network, IPC and UTS namespaces on an empty root into which
only an *allowlist* is mounted (:func:`visible_folders`): the system's ``/usr`` and the few files
of ``/etc`` that programs need to start, the interpreter's installation and virtual environment,
the course library's package folder, ``/dev`` and a fresh ``/proc``. Any other copy of the course
on the machine (the checkout whose environment runs the grader, a clone elsewhere, a home folder)
is simply absent, and so are the gradebook and every other student's work. The environment is
cleared too, down to the variables a kernel needs (:data:`KEPT_VARIABLES`), so that no
instructor's setting (a database address with its password) reaches the student's code. nbgrader
itself stays outside the sandbox and keeps the gradebook.

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

import importlib.util
import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from traitlets import Unicode

__all__ = [
    "KEPT_VARIABLES",
    "SANDBOX_CLASS",
    "SandboxedKernelManager",
    "bwrap_binary",
    "kernel_environment",
    "sandbox_args",
    "sandbox_problem",
    "visible_folders",
]

#: The dotted name nbgrader is given for the kernel manager.
SANDBOX_CLASS = "kvcourse_grader.sandbox.SandboxedKernelManager"

#: Environment variable naming the bubblewrap binary (default: ``bwrap`` on the PATH).
BWRAP_ENV = "KVCOURSE_BWRAP"

#: The environment variables a sandboxed kernel keeps (besides ``LC_*``); every other one is
#: cleared. ``KVCOURSE_GRADING_RUN`` and ``KVCOURSE_TEST_RUN`` mark the processes of one grading
#: run (or one test) so that they can be found and stopped.
KEPT_VARIABLES = (
    "PATH",
    "PYTHONPATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MALLOC_ARENA_MAX",
    "PYTHONUNBUFFERED",
    "PYTHONHASHSEED",
    "PYTHONDONTWRITEBYTECODE",
    "TRITON_INTERPRET",
    "JPY_SESSION_NAME",
    "KVCOURSE_GRADING_RUN",
    "KVCOURSE_TEST_RUN",
)

#: Files and folders of the system a Python program needs (read-only where they exist): the
#: dynamic linker's cache, users and groups, time zone, fonts, certificates. ``/usr`` holds the
#: system's programs and libraries.
SYSTEM_PATHS = (
    "/usr",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/fonts",
    "/etc/ssl/certs",
    "/sys/devices/system/cpu",  # how many processors: numpy and torch ask
)

#: Top-level names that merged-/usr systems keep as links into ``/usr``.
USR_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


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


def _library_folder() -> Path:
    """The folder of the installed course library (``kvcourse``), whatever way it is installed."""
    spec = importlib.util.find_spec("kvcourse")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the course library (kvcourse) is not installed beside the grader")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def visible_folders() -> list[Path]:
    """The folders of this Python that a sandboxed kernel sees, read-only: the interpreter's
    installation, its virtual environment and site-packages, and the course library's package
    folder (not the checkout around it). Without duplicates, parents before children."""
    found = {Path(sys.prefix), Path(sys.exec_prefix), Path(sys.base_prefix)}
    found |= {Path(sys.base_exec_prefix), Path(sys.executable).resolve().parent}
    found |= {Path(folder) for folder in site.getsitepackages()}
    found.add(_library_folder())
    resolved = sorted({folder.resolve() for folder in found if folder.exists()})
    return [f for f in resolved if not any(p in f.parents for p in resolved if p != f)]


def _check_apart(folders: list[Path], course_root: Path | None, workdir: Path) -> None:
    """Refuse folders that would show the course (or the whole disk) to the kernel."""
    for folder in folders:
        if folder == Path("/") or folder == workdir or folder in workdir.parents:
            raise RuntimeError(
                f"the sandbox would show {folder}, which holds the submission folder {workdir}: "
                "grade in a folder outside the Python installation"
            )
        if course_root is not None and (folder == course_root or folder in course_root.parents):
            raise RuntimeError(
                f"the Python installation at {folder} contains the course at {course_root}, so "
                "the sandbox cannot show one without the other: use a Python installed elsewhere "
                "(a virtual environment inside the course is fine)"
            )


def kernel_environment(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` a sandboxed kernel keeps (:data:`KEPT_VARIABLES` and ``LC_*``)."""
    return {k: v for k, v in env.items() if k in KEPT_VARIABLES or k.startswith("LC_")}


def sandbox_args(
    course_root: Path | None,
    workdir: Path,
    channel_dir: Path,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The bubblewrap arguments (binary first, up to ``--``) that run a kernel on an empty root
    holding only the allowlist of the module docstring: ``workdir`` (its only writable folder),
    ``channel_dir`` for its sockets and private home, and the environment ``env`` (default: this
    process's) cut down to :data:`KEPT_VARIABLES`."""
    binary = bwrap_binary()
    if binary is None:
        raise RuntimeError(sandbox_problem() or "bubblewrap is missing")
    workdir = workdir.resolve()
    folders = visible_folders()
    _check_apart(folders, course_root.resolve() if course_root else None, workdir)
    # The private /tmp first: a folder bound later may lie under /tmp (a clone there, its venv).
    args = [binary, *_namespaces(), "--tmpfs", "/tmp"]
    for name in USR_LINKS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in SYSTEM_PATHS:
        args += ["--ro-bind-try", name, name]
    for folder in folders:
        args += ["--ro-bind", str(folder), str(folder)]
    args += ["--dev", "/dev", "--proc", "/proc"]
    args += ["--bind", str(channel_dir), str(channel_dir)]
    args += ["--bind", str(workdir), str(workdir)]
    # Read-only around those two binds: a course kept under /tmp must not look writable in the
    # kernel (its writes would vanish silently); temporary files go to the private TMPDIR.
    args += ["--remount-ro", "/tmp", "--remount-ro", "/"]
    # A private home, temporary folder and caches beside the sockets; the parent's pid means
    # nothing in a new PID namespace (ipykernel would take its parent for dead), and bubblewrap
    # ends the kernel with its parent anyway.
    private = channel_dir / "home"
    args += ["--chdir", str(workdir), "--clearenv"]
    kept = kernel_environment(dict(os.environ) if env is None else env)
    for name, value in sorted(kept.items()):
        args += ["--setenv", name, value]
    for name in PRIVATE_FOLDERS:
        args += ["--setenv", name, str(private / name.lower())]
    return [*args, "--"]


#: Variables pointing into the kernel's private home (each a folder of its own).
PRIVATE_FOLDERS = (
    "HOME",
    "TMPDIR",
    "MPLCONFIGDIR",
    "IPYTHONDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "JUPYTER_CONFIG_DIR",
    "JUPYTER_DATA_DIR",
    "JUPYTER_RUNTIME_DIR",
)


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in the bubblewrap sandbox (module docstring): IPC
    sockets in a private folder, message-based interrupts, only the allowlist in sight and only
    the notebook's own folder writable."""

    course_root = Unicode(
        "",
        help="The course repository's root (default: the nearest folder above the working "
        "folder that holds grading/nbgrader_config.py); the sandbox refuses a Python "
        "installation that contains it.",
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
        for name in PRIVATE_FOLDERS:
            (self._channels / "home" / name.lower()).mkdir(parents=True, exist_ok=True)
        self.transport = "ipc"
        self.ip = str(self._channels / "kernel")
        self.connection_file = str(self._channels / "connection.json")

    def _root(self, workdir: Path) -> Path | None:
        if self.course_root:
            return Path(self.course_root).resolve()
        from kvcourse_grader.runner import CourseNotFound, find_course_root

        try:
            return find_course_root(workdir)
        except CourseNotFound:
            return None

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        assert self.kernel_spec is not None
        self.kernel_spec.interrupt_mode = "message"  # a signal would stop bubblewrap itself
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        env = kw.get("env") or dict(os.environ)
        box = sandbox_args(self._root(workdir), workdir, self._channels, env)
        return [*box, *cmd], kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        """jupyter_client's cleanup, then the socket folder with the connection file."""
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._channels, ignore_errors=True)
