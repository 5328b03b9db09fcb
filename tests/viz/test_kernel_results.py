"""§4 shows a kernel measurement only from a GPU run of the kernel benchmark."""

import json

from kvcourse.viz import gpu_kernel_runs, kernel_run_rows, latest_gpu_kernel_run


def record(**changes):
    base = {
        "benchmark": "paged_decode_attention",
        "date": "2026-12-01T10:00:00+00:00",
        "suite": "gpu",
        "sweep": False,
        "backend": "triton-gpu",
        "device": "NVIDIA H200",
        "driver": "570.1",
        "torch": "2.11.0",
        "triton": "3.5.0",
        "copy_bandwidth_bytes_per_s": 4.25e12,
        "problem": {"dtype": "bfloat16", "head_dim": 128},
        "rows": [
            {"batch": 64, "context": 4096, "contender": "ours", "status": "ok", "note": "",
             "time_us": 123.4, "copy_share": 0.97, "rel_err": 3e-3},
            {"batch": 1, "context": 4096, "contender": "flex", "status": "timeout", "note": ""},
        ],
    }  # fmt: skip
    return {**base, **changes}


def write(folder, name, content):
    path = folder / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_only_gpu_table_runs_count(tmp_path):
    write(tmp_path, "2026-11-30-cpu-budgets.txt", "page times ...")
    write(tmp_path, "2026-11-30-smoke.json", record(backend="triton-interpreter", suite="smoke"))
    write(tmp_path, "2026-12-01-h200-sweep.json", record(sweep=True))
    write(tmp_path, "other.json", record(benchmark="course_budgets"))
    write(tmp_path, "broken.json", "{not json")
    write(tmp_path, "list.json", [1, 2])
    assert gpu_kernel_runs(tmp_path) == []
    assert latest_gpu_kernel_run(tmp_path) is None
    assert gpu_kernel_runs(tmp_path / "missing") == []


def test_the_newest_gpu_run_and_its_rows(tmp_path):
    write(tmp_path, "b.json", record(date="2026-12-02T09:00:00+00:00", device="NVIDIA H100"))
    write(tmp_path, "a.json", record())
    runs = gpu_kernel_runs(tmp_path)
    assert [run.device for run in runs] == ["NVIDIA H200", "NVIDIA H100"]
    latest = latest_gpu_kernel_run(tmp_path)
    assert latest.device == "NVIDIA H100" and latest.path.name == "b.json"
    assert "2026-12-02 on NVIDIA H100, driver 570.1" in latest.label
    assert kernel_run_rows(latest) == [
        ["64 × 4096", "ours", "123.4", "97%", "3.0e-03", "ok"],
        ["1 × 4096", "flex", "—", "—", "—", "timeout"],
    ]


def test_the_run_is_named_in_both_editions(tmp_path):
    write(tmp_path, "a.json", record())
    write(tmp_path, "b.json", record(date="2026-12-02T09:00:00+00:00", driver=None))
    first, second = gpu_kernel_runs(tmp_path)
    assert first.label == "2026-12-01 on NVIDIA H200, driver 570.1, torch 2.11.0, triton 3.5.0"
    assert (
        first.label_zh == "2026-12-01 在 NVIDIA H200 上（驱动 570.1，torch 2.11.0，triton 3.5.0）"
    )
    assert second.label == "2026-12-02 on NVIDIA H200, torch 2.11.0, triton 3.5.0"
    assert second.label_zh == "2026-12-02 在 NVIDIA H200 上（torch 2.11.0，triton 3.5.0）"
