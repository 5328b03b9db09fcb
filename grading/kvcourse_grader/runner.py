"""Run nbgrader as a subprocess of the course, with a time limit and a memory limit.

Each call starts nbgrader with the Python that runs this code, in ``<root>/grading`` (nbgrader only
reads ``nbgrader_config.py`` from its working directory), through
:mod:`kvcourse_grader.gradebook_lock` so that parallel graders take turns on a SQLite gradebook.
The child gets

* its own session, so a timeout can stop it and everything it started;
* on Linux, an address-space limit (``RLIMIT_AS``) set before ``exec``; the kernel nbgrader
  starts inherits it, so a submission that allocates too much gets a ``MemoryError`` instead of
  taking the machine down;
* one BLAS/OpenMP thread and two malloc arenas, which keeps the address space of a kernel that
  imports torch and numpy under 1 GiB and makes grading runs comparable;
* a marker in its environment. Kernels run in sessions of their own, so after the child ends every
  process that still carries the marker is killed: nothing a submission starts outlives its run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

try:  # a dependency of ipykernel, so present wherever nbgrader can run a notebook
    import psutil
except ImportError:  # pragma: no cover
    psutil = None

CONFIG_NAME = "nbgrader_config.py"

#: nbgrader runs of this process still going, pid -> marker (parallel graders run several).
_LIVE: dict[int, str] = {}
_LIVE_LOCK = threading.Lock()
#: Set by :func:`stop_all_runs`: from then on no new run starts in this process.
_STOPPING = threading.Event()
MARKER = "KVCOURSE_GRADING_RUN"

#: Default per-process address-space limit. A kernel that imports numpy, torch, triton and
#: matplotlib with one thread maps about 0.9 GiB; nbgrader itself about 0.8 GiB; with 16 BLAS
#: threads a kernel reaches about 2 GiB. 4 GiB leaves room for all of that and for real work.
DEFAULT_MEMORY_LIMIT = 4 * 2**30

#: Default wall-clock limit for grading one student's assignment. nbgrader's own limits
#: (60 s a cell, 300 s a notebook; see grading/nbgrader_config.py) end a run well before this;
#: it is the last resort for an nbgrader process that hangs.
DEFAULT_TIMEOUT = 600.0


class CourseNotFound(Exception):
    """No ``grading/nbgrader_config.py`` where one was expected."""


def find_course_root(start: Path | str | None = None) -> Path:
    """The nearest directory at or above ``start`` (default: the cwd) holding grading/<config>."""
    here = Path(start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "grading" / CONFIG_NAME).is_file():
            return directory
    raise CourseNotFound(
        f"no grading/{CONFIG_NAME} in {here} or any directory above it; "
        "run from inside the course repository or pass --course-root"
    )


def check_course_root(root: Path | str) -> Path:
    """``root`` resolved, after checking that it holds grading/<config>."""
    root = Path(root).resolve()
    if not (root / "grading" / CONFIG_NAME).is_file():
        raise CourseNotFound(f"{root} has no grading/{CONFIG_NAME}")
    return root


def parse_size(text: str) -> int:
    """Bytes from ``"4G"``, ``"512M"``, ``"4GiB"`` or a plain number; ``"0"`` or ``"none"`` → 0."""
    text = text.strip().lower().removesuffix("ib").removesuffix("b")
    if text in ("", "0", "none", "off"):
        return 0
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    scale = units.get(text[-1], 1)
    number = text[:-1] if text[-1] in units else text
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (try 4G or 512M)") from None
    if value < 0:
        raise ValueError(f"a size cannot be negative: {text!r}")
    return int(value * scale)


def format_size(num_bytes: int) -> str:
    if num_bytes <= 0:
        return "none"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:g} {unit}"
    return f"{num_bytes} B"


@dataclass
class RunResult:
    """How one nbgrader subprocess ended."""

    args: list[str]
    returncode: int | None
    timed_out: bool
    seconds: float
    log: Path
    #: True when the run never started because grading was interrupted (Ctrl-C).
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.interrupted

    def reason(self) -> str:
        """A short account of a failure, for the per-student line."""
        if self.interrupted:
            return "not run: grading was interrupted"
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if self.returncode is not None and self.returncode < 0:
            name = signal.Signals(-self.returncode).name
            return f"nbgrader was killed by {name}"
        last = _last_error_line(self.log)
        return f"nbgrader exited with status {self.returncode}" + (f": {last}" if last else "")


def _last_error_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if "| ERROR]" in line and "see the" not in line.lower():
            return line.split("| ERROR]", 1)[1].strip()[:200]
    return ""


def grading_env(marker: str) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from PATH
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    env.setdefault("MALLOC_ARENA_MAX", "2")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[MARKER] = marker
    return env


def _limit_memory(limit: int):
    def apply() -> None:  # runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _kill_tree(pid: int) -> None:
    if psutil is not None:
        try:
            parent = psutil.Process(pid)
            family = [*parent.children(recursive=True), parent]
        except psutil.NoSuchProcess:
            family = []
        for proc in family:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
    try:
        os.killpg(pid, signal.SIGKILL)  # the child's own session (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_marked(marker: str) -> int:
    """Kill every process of ours whose environment carries ``marker``; return how many."""
    if psutil is None:
        return 0
    killed = 0
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARKER) == marker:
                proc.kill()
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return killed


def stop_all_runs() -> int:
    """Kill every nbgrader run this process started that is still going, with the kernels and
    everything else they started (an instructor pressed Ctrl-C), and start no new one from now
    on (such a call returns at once, not run); return how many were stopped."""
    _STOPPING.set()
    with _LIVE_LOCK:
        live = dict(_LIVE)
    for pid, marker in live.items():
        _kill_tree(pid)
        _kill_marked(marker)
    return len(live)


def resume_runs() -> None:
    """Let runs start again after :func:`stop_all_runs` (a new grading command begins)."""
    _STOPPING.clear()


def run_nbgrader(
    root: Path,
    args: list[str],
    *,
    log: Path,
    timeout: float | None = None,
    memory_limit: int = 0,
) -> RunResult:
    """Run ``nbgrader <args>`` in ``<root>/grading``, writing its output to ``log``.

    ``timeout`` (seconds) and ``memory_limit`` (bytes, Linux only) are off when falsy.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    marker = uuid.uuid4().hex
    command = [sys.executable, "-m", "kvcourse_grader.gradebook_lock", *args]
    preexec = None
    if memory_limit and sys.platform.startswith("linux"):
        preexec = _limit_memory(memory_limit)
    started = time.monotonic()
    timed_out = False
    with open(log, "wb") as out, _LIVE_LOCK:
        if _STOPPING.is_set():  # the run was interrupted: start nothing more
            return RunResult(args, None, False, 0.0, log, interrupted=True)
        proc = subprocess.Popen(
            command,
            cwd=root / "grading",
            env=grading_env(marker),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
        )
        # Registered under the same lock that stop_all_runs takes: no run slips past a stop.
        _LIVE[proc.pid] = marker
    try:
        proc.wait(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_tree(proc.pid)
        proc.wait()
    finally:
        with _LIVE_LOCK:
            _LIVE.pop(proc.pid, None)
        _kill_marked(marker)
    return RunResult(
        args=args,
        returncode=proc.returncode,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
        log=log,
    )
