"""A throwaway PostgreSQL server for the grading tests, from Debian's ``postgresql`` package.

Not a test module. :func:`postgres_server` runs ``initdb`` into a fresh folder, starts the server
on a free loopback port with trust authentication, yields a SQLAlchemy URL of an empty database,
and stops the server afterwards. PostgreSQL refuses to run as root, so as root the server runs
as Debian's ``postgres`` user. Without the package the test is skipped, saying how to get it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _binaries() -> Path | None:
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    found.sort(key=lambda path: int(path.split("/")[4]))  # the newest major version last
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_server(scratch: Path) -> Iterator[str]:
    """Start a private PostgreSQL server; yield ``postgresql+psycopg2://…`` for its database."""
    pytest.importorskip("psycopg2", reason="pip install psycopg2-binary (in the test extras)")
    bindir = _binaries()
    if bindir is None:
        pytest.skip(
            "PostgreSQL is not installed: `sudo apt-get install postgresql` "
            "(`make system-packages` does it as root)"
        )
    run_as: list[str] = []
    # As root, the server runs as `postgres`, which cannot enter pytest's private temp folders.
    parent = "/tmp" if os.geteuid() == 0 else scratch
    data = Path(tempfile.mkdtemp(prefix="kvcourse-pg-", dir=parent))
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    log = data / "server.log"

    def run(*command: str) -> None:
        done = subprocess.run([*run_as, *command], capture_output=True, text=True, timeout=120)
        if done.returncode:
            log_text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}{log_text}")

    cluster = data / "cluster"
    run(str(bindir / "initdb"), "-D", str(cluster), "-A", "trust", "-U", "grader", "-E", "UTF8")
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={data}"
    run(str(bindir / "pg_ctl"), "-D", str(cluster), "-l", str(log), "-o", options, "-w", "start")
    try:
        import psycopg2

        deadline = time.monotonic() + 30
        while True:
            try:
                con = psycopg2.connect(
                    host="127.0.0.1", port=port, user="grader", dbname="postgres"
                )
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        con.autocommit = True
        con.cursor().execute("CREATE DATABASE gradebook")
        con.close()
        yield f"postgresql+psycopg2://grader@127.0.0.1:{port}/gradebook"
    finally:
        subprocess.run(
            [*run_as, str(bindir / "pg_ctl"), "-D", str(cluster), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(data, ignore_errors=True)
