"""The grader's end of the snapshots: the socket each snapshot of a student's kernel calls in
on, and the code that makes the kernel take one.

:class:`~kvcourse_grader.preprocessors.RobustExecute` opens one :class:`SnapshotListener` in the
notebook's folder (the one folder the sandbox lets the kernel write to) and, where a hidden cell
stands, runs :func:`snapshot_code` silently in the kernel: the kernel forks, and the child (the
snapshot, :func:`kvcourse_grader.snapshot_server.take_snapshot`) connects and says the nonce it
was given. Connections that were waiting before, or that say anything else, are closed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from functools import cache
from pathlib import Path

from kvcourse_grader import snapshot_server
from kvcourse_grader.hidden_harness import harness_source
from kvcourse_grader.snapshot_server import ChannelError, receive

__all__ = ["SnapshotListener", "kernel_visible_source", "snapshot_code"]


class SnapshotListener:
    """The grader's socket in the notebook's folder, where each snapshot calls in."""

    def __init__(self, folder: Path | str) -> None:
        folder = Path(folder).resolve()
        name = f".kvcourse-snapshots-{secrets.token_hex(6)}.sock"
        self.path = folder / name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if len(str(self.path)) < 100:
            self.sock.bind(str(self.path))
            self.kernel_path = str(self.path)
        else:  # too long for a socket address: bound through the folder's descriptor
            fd = os.open(folder, os.O_PATH)
            try:
                self.sock.bind(f"/proc/self/fd/{fd}/{name}")
            finally:
                os.close(fd)
            self.kernel_path = name  # the kernel runs in the notebook's folder
        self.sock.listen(16)

    def drain(self) -> None:
        """Close every connection waiting now (none can be a snapshot not yet taken)."""
        self.sock.setblocking(False)
        try:
            while True:
                conn, _ = self.sock.accept()
                conn.close()
        except (BlockingIOError, OSError):
            pass
        finally:
            self.sock.setblocking(True)

    def accept(self, nonce: str, wait: float) -> socket.socket | None:
        """The connection of the snapshot that says ``nonce``, or None after ``wait`` seconds."""
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return None
            try:
                conn.settimeout(min(5.0, max(left, 0.1)))
                hello = receive(conn)
            except (OSError, ChannelError):
                conn.close()
                continue
            if type(hello) is dict and hello.get("nonce") == nonce:
                conn.settimeout(None)
                return conn
            conn.close()
        return None

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()


@cache
def _server_source() -> str:
    """The snapshot server's source, read once per grading process."""
    return Path(snapshot_server.__file__).read_text(encoding="utf-8")


def kernel_visible_source() -> str:
    """The grader's own source that :func:`snapshot_code` shows the kernel (the snapshot server
    and the harness): student code may print it, and nothing in it is a hidden test, so the
    output search (:func:`kvcourse_grader.leaks.hidden_text`) never takes it for one."""
    return _server_source() + "\n" + harness_source()


def snapshot_code(kernel_path: str, nonce: str, cpu_seconds: int, wall_seconds: int) -> str:
    """Code for the kernel that takes a snapshot (:func:`snapshot_server.take_snapshot`), with the
    server and the harness compiled from the grading machine's files into a private module."""
    server = _server_source()
    return "\n".join(
        [
            "def _kvcourse_snapshot(namespace):",
            "    import types",
            "",
            "    module = types.ModuleType('kvcourse_snapshot_server')",
            f"    exec(compile({server!r}, 'kvcourse_snapshot_server', 'exec'), vars(module))",
            f"    module.take_snapshot({kernel_path!r}, {nonce!r}, {harness_source()!r},",
            f"                         {int(cpu_seconds)}, {int(wall_seconds)}, namespace)",
            "",
            "",
            "_kvcourse_snapshot(globals())",
            "del _kvcourse_snapshot",
        ]
    )
