"""Backend choice: compiled Triton on a GPU, the interpreter on a CPU, reference elsewhere."""

import importlib.util
import subprocess
import sys

import pytest

from kvcourse.attention import backend as accel


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=300
    )


def test_missing_triton_falls_back_with_a_one_line_notice(monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec

    def no_triton(name, *args, **kwargs):
        return None if name == "triton" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(accel.importlib.util, "find_spec", no_triton)
    monkeypatch.setattr(accel, "_notice_shown", False)
    backend = accel.detect_backend()
    assert backend.name == "reference" and not backend.uses_triton
    assert accel.load_triton() is None
    assert accel.load_triton() is None  # the notice is shown once per process
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reference attention" in err


def test_user_request_forces_the_interpreter(monkeypatch):
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed on this platform")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert accel.detect_backend().name == "triton-interpreter"


@pytest.mark.slow  # a fresh Python that imports torch and Triton
def test_cpu_machine_gets_the_interpreter_in_a_fresh_process():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed on this platform")
    code = (
        "import os, torch\n"
        "from kvcourse.attention.backend import detect_backend, load_triton\n"
        "b = detect_backend(); t = load_triton()\n"
        "print(b.name, torch.cuda.is_available(), os.environ.get('TRITON_INTERPRET'))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    name, has_gpu, flag = result.stdout.split()
    if has_gpu == "True":
        assert name == "triton-gpu"
    else:
        assert (name, flag) == ("triton-interpreter", "1")


@pytest.mark.slow  # a fresh Python that imports torch and Triton
def test_triton_imported_too_early_on_a_cpu_is_a_clear_error():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed on this platform")
    code = (
        "import torch, triton\n"
        "if torch.cuda.is_available(): print('gpu'); raise SystemExit(0)\n"
        "from kvcourse.attention.backend import load_triton\n"
        "load_triton()\n"
    )
    result = run_python(code)
    if result.stdout.strip() == "gpu":
        pytest.skip("on a GPU machine compiled mode is the right one")
    assert result.returncode != 0
    assert "Restart the kernel and import kvcourse before triton" in result.stderr
