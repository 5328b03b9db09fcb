"""kvcourse_grader.runner: sizes, the environment of a grading run, and the memory limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from grading_course import LINUX

from kvcourse_grader import runner


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4G", 4 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", 3 * 2**29), ("0", 0), ("none", 0)],
)
def test_parse_size(text, expected):
    assert runner.parse_size(text) == expected


def test_parse_size_refuses_nonsense_and_formats_back():
    for text in ("lots", "-1G"):
        with pytest.raises(ValueError):
            runner.parse_size(text)
    assert runner.format_size(4 * 2**30) == "4 GiB" and runner.format_size(0) == "none"


def test_grading_env_limits_threads_and_finds_alembic():
    env = runner.grading_env("m")
    assert env[runner.MARKER] == "m"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    assert "OMP_NUM_THREADS" in env and "MALLOC_ARENA_MAX" in env


@pytest.mark.skipif(not LINUX, reason="RLIMIT_AS is applied on Linux only")
def test_default_memory_limit_lets_numpy_and_torch_work():
    code = "import numpy, torch; (torch.randn(512, 512) @ torch.randn(512, 512)).sum().item()"
    pytest.importorskip("torch")
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=runner.grading_env("test"),
        preexec_fn=runner._limit_memory(runner.DEFAULT_MEMORY_LIMIT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
