"""One nbgrader process that grades many submissions in turn, so nbgrader starts once per worker.

Starting nbgrader costs about 7 s of CPU before it reads a notebook (importing it pulls in
jsonschema's format checkers, which compile dozens of grammars); a one-line solution notebook runs
in 4 s. :class:`NbgraderWorker` starts ``python -m kvcourse_grader.nbgrader_worker`` once, with the
same limits as :func:`kvcourse_grader.runner.run_nbgrader` (its own session, the address-space
limit, one BLAS thread, the run marker), and sends it one ``nbgrader`` command line at a time.
The child runs each command in-process, exactly as ``nbgrader ARGS`` would (fresh application
objects, the configuration file read again), with its output going to that run's log, and
replies with the exit status. Each student's kernel is still a process of its own, in the sandbox,
started and stopped by nbgrader for that run, and carries a per-run marker: after every run, every
process with that marker is killed, so nothing a submission starts reaches the next one.

A run that passes its time limit, or a child that dies (an nbgrader crash, the memory limit), ends
that run the way a one-off process would (timed out, or killed by a signal) and the next run
starts a fresh child. A child retires after :data:`MAX_RUNS` runs or once it has grown past
:data:`RETIRE_RSS`, so memory it keeps between runs never counts against a later student.
"""

from __future__ import annotations

import gc
import json
import os
import select
import subprocess
import sys
import time
import traceback
import uuid
from pathlib import Path

from kvcourse_grader import runner

__all__ = ["MAX_RUNS", "RETIRE_RSS", "RUN_MARKER", "NbgraderWorker", "main"]

#: Runs one child takes before a fresh one replaces it.
MAX_RUNS = 24
#: Resident memory past which a child retires after its current run.
RETIRE_RSS = 1.5 * 2**30
#: Environment variable naming the current run inside the child (its kernels inherit it).
RUN_MARKER = "KVCOURSE_GRADING_STUDENT_RUN"
_REPLY_FD = "KVCOURSE_WORKER_REPLY_FD"


class NbgraderWorker:
    """A long-lived nbgrader process for the course at ``root``; :meth:`run` grades one command
    line (as :func:`kvcourse_grader.runner.run_nbgrader` would) and :meth:`close` ends it.

    One worker serves one thread at a time (the fan-out gives each thread its own)."""

    def __init__(self, root: Path, *, memory_limit: int = 0) -> None:
        self.root = Path(root)
        self.memory_limit = memory_limit
        self._proc: subprocess.Popen | None = None
        self._reply: int | None = None
        self._marker = ""
        self._runs = 0

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        self._marker = uuid.uuid4().hex
        env = runner.grading_env(self._marker)
        env[_REPLY_FD] = str(write_end)
        preexec = None
        if self.memory_limit and sys.platform.startswith("linux"):
            preexec = runner._limit_memory(self.memory_limit)
        with runner._LIVE_LOCK:
            if runner._STOPPING.is_set():
                os.close(read_end)
                os.close(write_end)
                return
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "kvcourse_grader.nbgrader_worker"],
                cwd=self.root / "grading",
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(write_end,),
                start_new_session=True,
                preexec_fn=preexec,
            )
            runner._LIVE[self._proc.pid] = self._marker
        os.close(write_end)
        self._reply, self._runs = read_end, 0

    def _reap(self) -> int | None:
        """Kill the child with everything it started; its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        runner._kill_tree(proc.pid)
        returncode = proc.wait()
        with runner._LIVE_LOCK:
            runner._LIVE.pop(proc.pid, None)
        runner._kill_marked(self._marker)
        if self._reply is not None:
            os.close(self._reply)
            self._reply = None
        return returncode

    def _read_reply(self, deadline: float | None) -> dict | None:
        """The child's reply line, or None when it died or the deadline passed first."""
        data = b""
        while not data.endswith(b"\n"):
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._reply], [], [], wait)
            if not ready:
                return None
            chunk = os.read(self._reply, 4096)
            if not chunk:
                return None
            data += chunk
        return json.loads(data)

    def run(self, args: list[str], *, log: Path, timeout: float | None = None) -> runner.RunResult:
        """Run ``nbgrader <args>`` in the child, its output in ``log``; how it ended."""
        log.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        if self._proc is None:
            self._start()
        if self._proc is None:  # grading was interrupted: start nothing more
            return runner.RunResult(args, None, False, 0.0, log, interrupted=True)
        run = uuid.uuid4().hex
        request = {"args": list(args), "log": str(log.resolve()), "run": run}
        deadline = started + timeout if timeout else None
        try:
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
            reply = self._read_reply(deadline)
        except (BrokenPipeError, OSError):
            reply = None
        finally:
            _kill_run(run)
        timed_out = reply is None and deadline is not None and time.monotonic() >= deadline
        if reply is None:
            returncode = self._reap()
            return runner.RunResult(
                args, None if timed_out else returncode, timed_out, time.monotonic() - started, log
            )
        self._runs += 1
        if reply.get("retire") or self._runs >= MAX_RUNS:
            self.close()
        return runner.RunResult(args, int(reply["rc"]), False, time.monotonic() - started, log)

    def close(self) -> None:
        """End the child (it finishes nothing: call between runs)."""
        if self._proc is not None and self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._reap()


def _kill_run(run: str) -> None:
    """Kill every process of this machine's user whose environment names the run ``run``."""
    if runner.psutil is None:
        return
    for proc in runner.psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(RUN_MARKER) == run:
                proc.kill()
        except (runner.psutil.Error, OSError):
            continue


# --- the child ------------------------------------------------------------------------------------


def _forget_applications() -> None:
    """Drop every traitlets singleton (nbgrader's apps), so the next run builds fresh ones."""
    from traitlets.config import SingletonConfigurable

    stack = [SingletonConfigurable]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        cls._instance = None


def _run_one(request: dict) -> int:
    from nbgrader.apps.nbgraderapp import NbGraderApp

    sys.stdout.flush()
    sys.stderr.flush()
    out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.environ[RUN_MARKER] = request["run"]
    try:
        NbGraderApp.launch_instance(request["args"])  # what `nbgrader ARGS` runs
        return 0
    except SystemExit as stop:
        code = stop.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # noqa: BLE001 -- reported in the log, like nbgrader's own crash
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.environ.pop(RUN_MARKER, None)
        _forget_applications()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        gc.collect()


def _resident_bytes() -> int:
    try:
        return runner.psutil.Process().memory_info().rss if runner.psutil else 0
    except OSError:
        return 0


def main() -> None:
    """The child: read one request per line on stdin, run it, reply on the reply pipe."""
    from kvcourse_grader.gradebook_lock import serialize_sqlite_sessions

    reply = os.fdopen(int(os.environ.pop(_REPLY_FD)), "w", buffering=1)
    serialize_sqlite_sessions()
    for line in sys.stdin:
        rc = _run_one(json.loads(line))
        retire = _resident_bytes() > RETIRE_RSS
        reply.write(json.dumps({"rc": rc, "retire": retire}) + "\n")
        if retire:
            return


if __name__ == "__main__":
    main()
