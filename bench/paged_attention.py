"""Benchmark the course's paged decode-attention kernel against PyTorch's attention (the kernel
budget of CONTRIBUTING.md).

Run from the repository root:

    python bench/paged_attention.py           # GPU: the §7 table in about 3 minutes; on a CPU
                                              # this falls back to the smoke run below
    python bench/paged_attention.py --smoke   # anywhere: tiny float32 problems, well under a minute
                                              # (our kernel also with head sizes 80/96/112/192)
    python bench/paged_attention.py --sweep   # GPU: other launch configurations of our kernel
    python bench/paged_attention.py --head-dim 80   # any of the above with another head size

Every contender is checked against the PyTorch reference before it is timed:

* ``ours``: :func:`kvcourse.attention.paged_decode.paged_decode_attention` on the paged cache;
* ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention`` on K and V that are already
  contiguous per sequence (``enable_gqa=True``), i.e. attention without paging;
* ``gather-sdpa``: gather each sequence's pages into contiguous K and V, then the same SDPA call
  (the gather is timed: that is the price of paging done naively);
* ``flex``: ``torch.nn.attention.flex_attention`` compiled, reading the physical page pool directly
  through a block mask converted from the block table (PyTorch's own paged-attention recipe).

On a GPU each is timed with ``triton.testing.do_bench`` (median, L2 cache flushed before every
run), and its K+V bytes per second are compared with the measured device-to-device copy bandwidth
(bytes read + written). The table goes to stdout and to ``bench/results/<date>-<gpu>.txt``.

Robustness: the measurements run in a worker process that reports each result as it gets it. The
parent gives every measurement a time limit and the whole run a budget; a contender that hangs,
crashes the process or fails is reported as such and the rest go on in a fresh worker. The exit
status is 0 when our kernel's results were all correct, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "lib"))  # run from a checkout without installing the package

MARK = "@@bench "  # prefix of the worker's protocol lines on stdout


@dataclass(frozen=True)
class Suite:
    """One benchmark setting: the model shape and the (batch, context) points."""

    name: str
    dtype: str
    q_heads: int
    kv_heads: int
    head_dim: int
    block_size: int
    shapes: tuple[tuple[int, int], ...]
    tolerance: float  # on ||out - ref|| / ||ref||
    #: Head sizes our kernel is also checked with on the first shape, as "ours:d<size>" rows (not
    #: when --shapes picks the points).
    extra_head_dims: tuple[int, ...] = ()


GPU_SUITE = Suite(
    "gpu", "bfloat16", 32, 8, 128, 16, ((1, 4096), (8, 4096), (64, 4096), (32, 16384), (128, 1024)),
    tolerance=2e-2,
)  # fmt: skip
SMOKE_SUITE = Suite(
    "smoke", "float32", 4, 2, 32, 16, ((1, 256), (3, 96)), tolerance=1e-4,
    extra_head_dims=(80, 96, 112, 192),  # not powers of two: padded inside the kernel
)  # fmt: skip

#: The kernel budget (CONTRIBUTING.md): fraction of copy bandwidth, or microseconds for 1×4096.
TARGETS = {(1, 4096): ("time_us", 12.0), (8, 4096): ("fraction", 0.80)}
TARGETS.update({shape: ("fraction", 0.95) for shape in ((64, 4096), (32, 16384), (128, 1024))})

PEERS = ("ours", "sdpa", "gather-sdpa", "flex")


# ------------------------------------------------------------------------------------------------
# Worker: builds problems, checks and times contenders, prints one protocol line per result
# ------------------------------------------------------------------------------------------------


def emit(kind: str, **fields: object) -> None:
    print(MARK + json.dumps({"kind": kind, **fields}), flush=True)


@dataclass
class Problem:
    batch: int
    context: int
    q: object
    k_cache: object
    v_cache: object
    block_tables: object
    seq_lens: object
    reference: object
    kv_bytes: int


def build_problem(suite: Suite, batch: int, context: int, head_dim: int, device: str) -> Problem:
    import torch

    from kvcourse.attention import paged_decode_attention_reference

    dtype = getattr(torch, suite.dtype)
    torch.manual_seed(batch * 100_003 + context)
    pages = context // suite.block_size
    num_blocks = batch * pages
    shape = (num_blocks, suite.block_size, suite.kv_heads, head_dim)
    k_cache = torch.randn(shape, device=device, dtype=dtype)
    v_cache = torch.randn(shape, device=device, dtype=dtype)
    # Every sequence's pages scattered over the pool, as a long-running server leaves them.
    block_tables = torch.randperm(num_blocks, device=device).view(batch, pages).to(torch.int32)
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=device)
    q = torch.randn(batch, suite.q_heads, head_dim, device=device, dtype=dtype)
    reference = paged_decode_attention_reference(
        q.float(), k_cache.float(), v_cache.float(), block_tables, seq_lens
    )
    kv_bytes = 2 * batch * context * suite.kv_heads * head_dim * k_cache.element_size()
    return Problem(batch, context, q, k_cache, v_cache, block_tables, seq_lens, reference, kv_bytes)


def contiguous_kv(p: Problem):
    """[batch, kv_heads, context, head_dim] copies of K and V (a gather through the table)."""
    index = p.block_tables.long()
    batch, heads, dim = p.batch, p.k_cache.shape[2], p.k_cache.shape[3]
    k = p.k_cache[index].view(batch, p.context, heads, dim).transpose(1, 2)
    v = p.v_cache[index].view(batch, p.context, heads, dim).transpose(1, 2)
    return k, v


def sdpa(q, k, v):
    """PyTorch's fused attention for one query token; GQA by enable_gqa (torch >= 2.5)."""
    import torch.nn.functional as F

    try:
        return F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]
    except TypeError:  # older torch: repeat each KV head for its query heads
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return F.scaled_dot_product_attention(q[:, :, None], k, v)[:, :, 0]


_flex_compiled = None


def flex_paged_block_mask(p: Problem):
    """A FlexAttention BlockMask that reads the physical page pool through the block table.

    The pool is viewed as one long sequence of ``num_blocks × block_size`` tokens shared by the
    batch (K/V batch 1). Row b of the mask lists sequence b's pages: full pages as "full" blocks
    (no mask function evaluated), a last partial page as a masked block. The mask function maps a
    physical token back to its logical position (physical page -> logical page per sequence) and
    keeps it when it belongs to the sequence and lies before its end: FlexAttention requires the
    mask function to be right everywhere, the block mask only lets it skip blocks.
    """
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    block = p.k_cache.shape[1]
    num_blocks = p.k_cache.shape[0]
    batch, max_blocks = p.block_tables.shape
    device = p.block_tables.device
    lens = p.seq_lens.long()
    full = lens // block
    partial = (lens % block != 0).to(torch.int32)
    columns = torch.arange(max_blocks, device=device)

    full_indices = torch.zeros(batch, 1, 1, num_blocks, dtype=torch.int32, device=device)
    full_indices[:, 0, 0, :max_blocks] = torch.where(columns < full[:, None], p.block_tables, 0)
    partial_indices = torch.zeros(batch, 1, 1, num_blocks, dtype=torch.int32, device=device)
    last_page = p.block_tables.gather(1, full.clamp(max=max_blocks - 1)[:, None])[:, 0]
    partial_indices[:, 0, 0, 0] = torch.where(partial.bool(), last_page, 0)

    physical_to_logical = torch.full((batch, num_blocks), -1, dtype=torch.int32, device=device)
    used = columns[None, :] < (full + partial)[:, None]
    rows, cols = torch.nonzero(used, as_tuple=True)
    physical_to_logical[rows, p.block_tables[rows, cols].long()] = cols.to(torch.int32)

    def mask_mod(b, h, q_idx, kv_idx):
        page = physical_to_logical[b, kv_idx // block]
        return (page >= 0) & (page * block + kv_idx % block < lens[b])

    return BlockMask.from_kv_blocks(
        partial.view(batch, 1, 1),
        partial_indices,
        full.to(torch.int32).view(batch, 1, 1),
        full_indices,
        BLOCK_SIZE=(128, block),
        mask_mod=mask_mod,
        seq_lengths=(1, num_blocks * block),
    )


def make_contender(peer: str, p: Problem, device: str):
    """A zero-argument callable computing [batch, q_heads, head_dim], and a note for the table."""
    import torch

    from kvcourse.attention import LaunchConfig, head_dim_pad, paged_decode_attention

    if peer == "ours" or peer.startswith("ours:"):
        config = None
        fields = peer_fields(peer)
        if "t" in fields:
            config = LaunchConfig(
                tile_tokens=int(fields["t"]),
                num_splits=int(fields["s"]),
                num_warps=int(fields["w"]),
                num_stages=int(fields["st"]) if "st" in fields else 3,
            )
        args = (p.q, p.k_cache, p.v_cache, p.block_tables, p.seq_lens)
        note = describe_config(config or default_config(p))
        head_dim = p.q.shape[2]
        if head_dim_pad(head_dim) != head_dim:
            note += f", head_dim {head_dim} padded to {head_dim_pad(head_dim)} in the kernel"
        return (lambda: paged_decode_attention(*args, config=config)), note
    if peer == "sdpa":
        k, v = (t.contiguous() for t in contiguous_kv(p))
        return (lambda: sdpa(p.q, k, v)), "contiguous [B, H_kv, T, d], enable_gqa"
    if peer == "gather-sdpa":
        return (lambda: sdpa(p.q, *contiguous_kv(p))), "k_cache[table] gather, then SDPA"
    if peer == "flex":
        from torch.nn.attention.flex_attention import flex_attention

        global _flex_compiled
        mask = flex_paged_block_mask(p)
        num_tokens = p.k_cache.shape[0] * p.k_cache.shape[1]
        heads, dim = p.k_cache.shape[2], p.k_cache.shape[3]
        k = p.k_cache.view(1, num_tokens, heads, dim).transpose(1, 2)
        v = p.v_cache.view(1, num_tokens, heads, dim).transpose(1, 2)
        if device == "cuda":
            if _flex_compiled is None:
                _flex_compiled = torch.compile(flex_attention, dynamic=False)
            fn, note = _flex_compiled, "compiled; block mask from the block table"
        else:  # compiling needs a C++ toolchain and minutes: the smoke run checks the eager path
            fn, note = flex_attention, "eager (CPU smoke run); block mask from the block table"

        def run():
            out = fn(p.q[:, :, None], k, v, block_mask=mask, enable_gqa=True)
            return out[:, :, 0]

        return run, note
    if peer == "_hang":  # self-tests of the time limits and crash recovery (tests/)
        return (lambda: time.sleep(3600)), "self-test: never returns"
    if peer == "_crash":
        return (lambda: os._exit(7)), "self-test: kills the worker"
    raise ValueError(f"unknown contender {peer!r}; known: {', '.join(PEERS)}")


def peer_fields(peer: str) -> dict[str, str]:
    """The knobs of an "ours:..." contender: t<tile>-s<splits>-w<warps>-st<stages>, d<head_dim>."""
    return dict(re.findall(r"([a-z]+)(\d+)", peer.split(":", 1)[1])) if ":" in peer else {}


def default_config(p: Problem):
    import torch

    from kvcourse.attention import choose_launch_config

    cuda = p.q.device.type == "cuda"
    return choose_launch_config(
        batch=p.batch,
        q_heads=p.q.shape[1],
        kv_heads=p.k_cache.shape[2],
        head_dim=p.q.shape[2],
        max_context=p.block_tables.shape[1] * p.k_cache.shape[1],
        dtype=p.q.dtype,
        num_sms=torch.cuda.get_device_properties(0).multi_processor_count if cuda else None,
    )


def describe_config(config) -> str:
    return f"t{config.tile_tokens}-s{config.num_splits}-w{config.num_warps}-st{config.num_stages}"


def time_ms(fn, device: str, rep_ms: int) -> float:
    """Median milliseconds of fn(): do_bench (L2 flushed) on a GPU, wall clock on a CPU."""
    if device == "cuda":
        import triton.testing

        try:
            return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))
        except AssertionError:  # a Triton without return_mode="median"
            return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, quantiles=[0.5])[0])
    fn()  # warm-up
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def copy_bandwidth(device: str) -> tuple[float, str]:
    """Bytes read + written per second by a large device-to-device copy."""
    import torch

    nbytes = (1 << 30) if device == "cuda" else (64 << 20)
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), device, rep_ms=200)
    return 2 * nbytes / (ms * 1e-3), f"{nbytes >> 20} MiB copy, read + write, median"


def driver_version() -> str | None:
    """The NVIDIA driver's version as nvidia-smi reports it, or None where it cannot be asked."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def worker(suite: Suite, items: list[tuple[int, str]], rep_ms: int) -> None:
    import torch

    import kvcourse.attention.backend as accel

    backend = accel.detect_backend()
    device = "cuda" if backend.name == "triton-gpu" else "cpu"
    if device == "cpu":
        accel.load_triton()  # the interpreter flag must be set before anything imports triton
    import triton

    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (Triton interpreter)"
    sms = torch.cuda.get_device_properties(0).multi_processor_count if device == "cuda" else None
    bandwidth, how = copy_bandwidth(device)
    emit(
        "env",
        device=name,
        sms=sms,
        driver=driver_version() if device == "cuda" else None,
        cuda=torch.version.cuda if device == "cuda" else None,
        torch=torch.__version__,
        triton=triton.__version__,
        backend=backend.name,
        copy_bandwidth=bandwidth,
        copy_how=how,
    )
    problem = None
    for index, (shape_index, peer) in enumerate(items):
        emit("start", item=index)
        batch, context = suite.shapes[shape_index]
        head_dim = int(peer_fields(peer).get("d", suite.head_dim))
        result: dict[str, object] = {"item": index}
        try:
            key = (batch, context, head_dim)
            if problem is None or (problem.batch, problem.context, problem.q.shape[2]) != key:
                problem = None
                if device == "cuda":
                    torch.cuda.empty_cache()
                problem = build_problem(suite, batch, context, head_dim, device)
            fn, note = make_contender(peer, problem, device)
            out = fn()
            ref = problem.reference
            error = ((out.float() - ref).norm() / ref.norm()).item()
            ms = time_ms(fn, device, rep_ms)
            result.update(
                status="ok" if error <= suite.tolerance else "WRONG",
                error=error,
                ms=ms,
                kv_bytes=problem.kv_bytes,
                note=note,
            )
        except Exception as exc:  # report and go on with the next contender
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
            result.update(status="failed", note=message)
            if device == "cuda":
                try:
                    torch.cuda.synchronize()
                except Exception:  # the CUDA context is broken: let the parent restart us
                    emit("result", **result)
                    os._exit(3)
        emit("result", **result)


# ------------------------------------------------------------------------------------------------
# Parent: runs workers under time limits and prints the table
# ------------------------------------------------------------------------------------------------


def run_items(
    suite: Suite, items: list[tuple[int, str]], args: argparse.Namespace
) -> tuple[dict, list[dict]]:
    """Run every item in workers; returns the environment and one result per item.

    A worker runs the items still to do, in order. When one hangs past ``--item-timeout``, or the
    worker dies, that item is marked and a fresh worker carries on with the items after it.
    """
    env: dict = {}
    results: list[dict] = [{} for _ in items]
    deadline = time.monotonic() + args.budget
    todo = list(range(len(items)))
    while todo:
        if time.monotonic() >= deadline:
            for i in todo:
                results[i] = {"status": "skipped", "note": "time budget spent"}
            break
        finished, failure = _run_worker(suite, [items[i] for i in todo], args, deadline, env)
        for position, result in finished.items():
            results[todo[position]] = result
        if failure is not None:  # the item at this position hung or took the worker down
            position, result = failure
            results[todo[position]] = result
            if not args.quiet:
                print("  " + format_row(suite, items[todo[position]], result, env), flush=True)
            todo = todo[position + 1 :]
        else:
            todo = todo[len(finished) :] if finished else todo[1:]
    return env, results


def _run_worker(
    suite: Suite,
    items: list[tuple[int, str]],
    args: argparse.Namespace,
    deadline: float,
    env: dict,
) -> tuple[dict[int, dict], tuple[int, dict] | None]:
    """One worker over ``items``: the results it sent, and the item that failed it, if any."""
    command = [sys.executable, __file__, "--worker", json.dumps(items), "--suite", suite.name]
    command += ["--rep-ms", str(args.rep_ms), "--head-dim", str(suite.head_dim)]
    finished: dict[int, dict] = {}
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True
        )
        lines: queue.Queue = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        current = 0  # the item being measured (or, before the first "start", set up for)
        limit = time.monotonic() + args.startup_timeout + args.item_timeout
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, min(limit, deadline) - time.monotonic()))
                except queue.Empty:
                    if not env:
                        raise SystemExit("the benchmark worker did not start in time") from None
                    if time.monotonic() >= deadline:
                        note = "time budget spent"
                        return finished, (current, {"status": "skipped", "note": note})
                    note = f"no result after {args.item_timeout:.0f} s; worker killed"
                    return finished, (current, {"status": "timeout", "note": note})
                if line is None:  # the worker exited
                    proc.wait()
                    if len(finished) == len(items):
                        return finished, None
                    stderr.seek(0)
                    lines_err = stderr.read().strip().splitlines()
                    if not env:  # it could not even start: no point in trying again
                        sys.stderr.write("\n".join(lines_err[-30:]) + "\n")
                        raise SystemExit("the benchmark worker failed before measuring anything")
                    note = f"worker exited with status {proc.returncode}"
                    if lines_err:
                        note += ": " + lines_err[-1][:120]
                    if current in finished:  # it reported the failure, then exited
                        return finished, None
                    return finished, (current, {"status": "crashed", "note": note})
                if not line.startswith(MARK):
                    continue
                message = json.loads(line[len(MARK) :])
                if message["kind"] == "env" and not env:
                    env.update(message)
                elif message["kind"] == "start":
                    current = message["item"]
                    limit = time.monotonic() + args.item_timeout
                elif message["kind"] == "result":
                    finished[message["item"]] = message
                    if not args.quiet:
                        row = format_row(suite, items[message["item"]], message, env)
                        print("  " + row, flush=True)
        finally:
            _kill(proc)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def format_row(suite: Suite, item: tuple[int, str], result: dict, env: dict) -> str:
    batch, context = suite.shapes[item[0]]
    cells = [f"{batch}×{context}", item[1]]
    if "ms" in result:
        seconds = result["ms"] * 1e-3
        rate = result["kv_bytes"] / seconds
        share = rate / env["copy_bandwidth"] if env.get("copy_bandwidth") else float("nan")
        gbs = rate / 1e9
        cells += [f"{result['ms'] * 1e3:.1f}", f"{gbs:.0f}" if gbs >= 100 else f"{gbs:.2f}"]
        cells.append(f"{share:.1%}")
        cells += [f"{result['error']:.1e}", result["status"]]
    else:
        cells += ["", "", "", "", result.get("status", "?")]
    cells.append(result.get("note", ""))
    return _join(cells)


def report(suite: Suite, items, env: dict, results: list[dict], wall_s: float) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sms = f" ({env['sms']} SMs)" if env.get("sms") else ""
    lines = [
        f"Paged decode attention benchmark, {now}",
        f"device: {env.get('device', '?')}{sms}"
        + (f" | driver {env['driver']} | CUDA {env.get('cuda')}" if env.get("driver") else "")
        + f" | torch {env.get('torch', '?')} | "
        f"triton {env.get('triton', '?')} | backend {env.get('backend', '?')}",
        f"problem: {suite.dtype}, head_dim {suite.head_dim}, {suite.q_heads} query / "
        f"{suite.kv_heads} KV heads, block size {suite.block_size}, pages shuffled over the pool",
        f"device copy bandwidth: {env.get('copy_bandwidth', float('nan')) / 1e9:.0f} GB/s "
        f"({env.get('copy_how', '?')})",
        "timing: "
        + (
            "triton.testing.do_bench median, L2 flushed before every run"
            if env.get("backend") == "triton-gpu"
            else "wall clock, median of 3 runs (interpreter: correctness smoke test, not speed)"
        ),
        "KV GB/s = K+V bytes of the batch / time; % copy = that / device copy bandwidth; "
        "rel err = ||out - ref|| / ||ref|| vs the float32 PyTorch reference",
        "",
        format_row_header(),
    ]
    lines += [
        format_row(suite, item, result, env) for item, result in zip(items, results, strict=True)
    ]
    if env.get("backend") == "triton-gpu":
        lines += ["", "targets (CONTRIBUTING.md, Budgets) for ours:"]
        for (shape_index, peer), result in zip(items, results, strict=True):
            shape = suite.shapes[shape_index]
            if peer != "ours" or shape not in TARGETS or "ms" not in result:
                continue
            kind, goal = TARGETS[shape]
            if kind == "time_us":
                got, met = result["ms"] * 1e3, result["ms"] * 1e3 <= goal
                text = f"{got:.1f} µs (target ≤ {goal:.0f} µs)"
            else:
                got = result["kv_bytes"] / (result["ms"] * 1e-3) / env["copy_bandwidth"]
                met = got >= goal
                text = f"{got:.1%} of copy bandwidth (target ≥ {goal:.0%})"
            lines.append(f"  {shape[0]}×{shape[1]}: {text}: {'met' if met else 'MISSED'}")
    lines += ["", f"wall time {wall_s:.0f} s"]
    return "\n".join(lines)


def results_record(
    suite: Suite, items, env: dict, results: list[dict], wall_s: float, *, sweep: bool
) -> dict:
    """The run as data, written next to the table as ``<name>.json``: what the book's §4 reads
    (``kvcourse.viz.kernel_results``). One row per measured item, in the table's order."""
    rows = []
    for (shape_index, peer), result in zip(items, results, strict=True):
        batch, context = suite.shapes[shape_index]
        row = {"batch": batch, "context": context, "contender": peer}
        row["status"] = result.get("status", "?")
        row["note"] = result.get("note", "")
        if "ms" in result:
            rate = result["kv_bytes"] / (result["ms"] * 1e-3)
            row["time_us"] = result["ms"] * 1e3
            row["kv_gb_per_s"] = rate / 1e9
            row["copy_share"] = rate / env["copy_bandwidth"] if env.get("copy_bandwidth") else None
            row["rel_err"] = result["error"]
        rows.append(row)
    return {
        "benchmark": "paged_decode_attention",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "suite": suite.name,
        "sweep": sweep,
        "backend": env.get("backend"),
        "device": env.get("device"),
        "driver": env.get("driver"),
        "cuda": env.get("cuda"),
        "sms": env.get("sms"),
        "torch": env.get("torch"),
        "triton": env.get("triton"),
        "copy_bandwidth_bytes_per_s": env.get("copy_bandwidth"),
        "problem": {
            "dtype": suite.dtype,
            "head_dim": suite.head_dim,
            "q_heads": suite.q_heads,
            "kv_heads": suite.kv_heads,
            "block_size": suite.block_size,
        },
        "wall_s": wall_s,
        "rows": rows,
    }


def _join(cells: list[str]) -> str:
    """Fixed-width columns: names left-aligned, numbers right-aligned, notes free."""
    widths = (12, 22, 10, 9, 7, 8, 8, 0)
    padded = [
        cell.ljust(width) if i < 2 or i >= 6 else cell.rjust(width)
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
    ]
    return "  ".join(padded).rstrip()


def format_row_header() -> str:
    cells = ["batch×ctx", "contender", "time µs", "KV GB/s", "% copy", "rel err", "status", "notes"]
    return _join(cells)


def sweep_peers(suite: Suite, batch: int, context: int, sms: int) -> list[str]:
    """Launch configurations around the default one: one knob changed at a time."""
    import torch

    from kvcourse.attention import MAX_SPLITS, LaunchConfig, choose_launch_config

    base = choose_launch_config(
        batch=batch, q_heads=suite.q_heads, kv_heads=suite.kv_heads, head_dim=suite.head_dim,
        max_context=context, dtype=getattr(torch, suite.dtype), num_sms=sms,
    )  # fmt: skip
    variants = {base}
    tiles = math.ceil(context / base.tile_tokens)
    for splits in {1, base.num_splits // 2, base.num_splits * 2, 8, 16, 32}:
        if 1 <= splits <= min(tiles, MAX_SPLITS):
            variants.add(LaunchConfig(base.tile_tokens, splits, base.num_warps, base.num_stages))
    for tile in (32, 128):
        splits = max(1, min(MAX_SPLITS, base.num_splits, math.ceil(context / tile)))
        variants.add(LaunchConfig(tile, splits, base.num_warps, 2 if tile == 128 else 3))
    for stages in (2, 4):
        variants.add(LaunchConfig(base.tile_tokens, base.num_splits, base.num_warps, stages))
    variants.add(LaunchConfig(base.tile_tokens, base.num_splits, 8, base.num_stages))
    ordered = [base] + sorted(variants - {base}, key=describe_config)
    return ["ours:" + describe_config(c) for c in ordered]


def compile_report(suite: Suite) -> int:
    """Compile our kernel for an H100/H200 (sm_90) on any machine and report what the GPU would run.

    Needs no GPU: Triton's compiler and its bundled ``cuobjdump`` run on the CPU. For the default
    launch configuration of every benchmark shape it prints registers per thread, spills (stack and
    local memory: should be 0), shared memory, and the count of 16-byte asynchronous global->shared
    copies (``LDGSTS.128``: present means the compiler pipelined the K/V loads) and of tensor-core
    instructions (``HMMA``). Triton's internal compile API changes between versions, so this is a
    diagnostic, not a promise: when the toolchain is missing it says so and exits 0.
    """
    import torch

    import kvcourse.attention.backend as accel

    # Compiled mode on a machine without a GPU: only compiling, never launching.
    os.environ.pop("TRITON_INTERPRET", None)
    accel.detect_backend = lambda: accel.Backend("triton-gpu", "compile report for sm_90")
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        from kvcourse.attention import choose_launch_config, head_dim_pad
        from kvcourse.attention import triton_paged_decode as kernels
        from kvcourse.attention.launch import group_pad

        cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if not cuobjdump.exists():
            raise FileNotFoundError(cuobjdump)
    except Exception as exc:
        print(f"compile report unavailable here: {type(exc).__name__}: {exc}")
        return 0

    dtype = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[suite.dtype]
    group = suite.q_heads // suite.kv_heads
    print(f"Compile report: Triton {triton.__version__}, target sm_90, {suite.dtype}, "
          f"head_dim {suite.head_dim}, GQA {group}, block {suite.block_size} "
          "(H200 launch plans, 132 SMs)")  # fmt: skip
    print(f"{'batch×ctx':<12}{'config':<18}{'regs':>6}{'spill B':>9}{'smem KiB':>10}"
          f"{'LDGSTS.128':>12}{'HMMA':>6}")  # fmt: skip
    failures = 0
    for batch, context in suite.shapes:
        config = choose_launch_config(
            batch=batch, q_heads=suite.q_heads, kv_heads=suite.kv_heads,
            head_dim=suite.head_dim, max_context=context, dtype=getattr(torch, suite.dtype),
            num_sms=132,
        )  # fmt: skip
        fn = kernels.paged_decode_kernel
        pointers = {"block_tables_ptr": "*i32", "seq_lens_ptr": "*i32"}
        pointers.update(part_out_ptr="*fp32", part_lse_ptr="*fp32")
        signature, constants, attrs = {}, {}, {}
        for i, name in enumerate(fn.arg_names):
            if name.endswith("_ptr"):
                signature[name] = pointers.get(name, f"*{dtype}")
                attrs[(i,)] = [["tt.divisibility", 16]]
            elif name.isupper() or name.endswith(("_dim", "_page")) or name == "stride_seq_lens":
                signature[name] = "constexpr"  # Triton specialises the strides that are 1
                constants[name] = 1  # (innermost dimensions); the upper-case ones are set below
            elif name == "qk_scale":
                signature[name] = "fp32"
            else:
                signature[name] = "i32"
                if name.startswith("stride"):
                    attrs[(i,)] = [["tt.divisibility", 16]]
        constants.update(
            GROUP=group, GROUP_PAD=group_pad(group), HEAD_DIM=suite.head_dim,
            HEAD_DIM_PAD=head_dim_pad(suite.head_dim), BLOCK_SIZE=suite.block_size,
            TILE=config.tile_tokens,
            SPLIT=config.num_splits > 1, DOT_PRECISION="tf32",
        )  # fmt: skip
        try:
            compiled = triton.compile(
                ASTSource(fn, signature, constants, attrs),
                target=GPUTarget("cuda", 90, 32),
                options={"num_warps": config.num_warps, "num_stages": config.num_stages},
            )
            with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
                cubin.write(compiled.asm["cubin"])
                cubin.flush()
                usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", cubin.name],
                                       capture_output=True, text=True).stdout  # fmt: skip
                sass = subprocess.run([str(cuobjdump), "--dump-sass", cubin.name],
                                      capture_output=True, text=True).stdout  # fmt: skip
            fields = dict(re.findall(r"(REG|STACK|LOCAL):(\d+)", usage))
            spill = int(fields.get("STACK", 0)) + int(fields.get("LOCAL", 0))
            print(f"{f'{batch}×{context}':<12}{describe_config(config):<18}"
                  f"{fields.get('REG', '?'):>6}{spill:>9}{compiled.metadata.shared / 1024:>10.1f}"
                  f"{sass.count('LDGSTS.E.BYPASS.128'):>12}{sass.count('HMMA'):>6}")  # fmt: skip
        except Exception as exc:
            failures += 1
            print(f"{batch}×{context}: compile failed: {type(exc).__name__}: {exc}"[:300])
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny float32 problems (CPU/CI)")
    parser.add_argument("--sweep", action="store_true", help="GPU: try launch configurations")
    parser.add_argument(
        "--compile-report", action="store_true", help="no GPU needed: compile for sm_90, report"
    )
    parser.add_argument("--peers", default=",".join(PEERS), help="contenders, comma-separated")
    parser.add_argument("--shapes", help="indices of the batch×context points to run, e.g. 0,2")
    parser.add_argument("--out", help="write the table here (default on a GPU: bench/results/)")
    parser.add_argument("--budget", type=float, help="seconds for the whole run")
    parser.add_argument("--item-timeout", type=float, default=75.0, help="seconds per measurement")
    parser.add_argument(
        "--startup-timeout", type=float, default=60.0, help="worker start allowance"
    )
    parser.add_argument("--rep-ms", type=int, default=100, help="do_bench repetition time (ms)")
    parser.add_argument("--quiet", action="store_true", help="no rows as they arrive")
    parser.add_argument(
        "--head-dim", type=int, help="head size instead of the suite's (1 to 256; e.g. 80, 96)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--suite", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.head_dim is not None and not 1 <= args.head_dim <= 256:
        raise SystemExit(f"--head-dim must be from 1 to 256, got {args.head_dim}")
    with_head_dim = {"head_dim": args.head_dim} if args.head_dim else {}
    if args.worker:
        suite = replace(GPU_SUITE if args.suite == "gpu" else SMOKE_SUITE, **with_head_dim)
        worker(suite, [tuple(item) for item in json.loads(args.worker)], args.rep_ms)
        return 0

    if args.compile_report:
        return compile_report(replace(GPU_SUITE, **with_head_dim))

    import torch

    gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
    if not gpu and not args.smoke:
        print("No CUDA GPU here: running the smoke configuration instead (--smoke).\n")
    suite = replace(GPU_SUITE if gpu and not args.smoke else SMOKE_SUITE, **with_head_dim)
    peers = [p for p in args.peers.split(",") if p]
    shapes = range(len(suite.shapes))
    if args.shapes:
        shapes = [int(i) for i in args.shapes.split(",")]
        if not all(0 <= i < len(suite.shapes) for i in shapes):
            raise SystemExit(f"--shapes: indices 0..{len(suite.shapes) - 1} of {suite.shapes}")
    if args.sweep:
        if suite.name != "gpu":
            raise SystemExit("--sweep needs a GPU (it tunes launch configurations)")
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        items = [(i, peer) for i in shapes for peer in sweep_peers(suite, *suite.shapes[i], sms)]
    else:
        # Fast contenders for every shape first, FlexAttention (slow to compile) last, so a spent
        # budget costs the least important numbers.
        first = [p for p in peers if p != "flex"]
        if suite.name == "smoke" and "ours" in first:  # the split-KV path too, forced
            first.insert(first.index("ours") + 1, "ours:t16-s3-w4-st1")
        items = [(i, p) for p in first for i in shapes]
        items = sorted(items, key=lambda item: (item[0], first.index(item[1])))
        if "ours" in first and not args.shapes:  # other head sizes, on the first shape
            items += [(0, f"ours:d{d}") for d in suite.extra_head_dims]
        if "flex" in peers:
            items += [(i, "flex") for i in shapes]
    if args.budget is None:
        args.budget = 180.0 if suite.name == "gpu" and not args.sweep else 240.0
        if suite.name == "smoke":
            args.budget = 120.0

    start = time.monotonic()
    if not args.quiet:
        print(f"{len(items)} measurements, budget {args.budget:.0f} s; rows as they arrive:")
        print("  " + format_row_header(), flush=True)
    env, results = run_items(suite, items, args)
    if not args.quiet:
        print()
    wall_s = time.monotonic() - start
    text = report(suite, items, env, results, wall_s)
    print(text)

    out = args.out
    if out is None and suite.name == "gpu":
        gpu_name = re.sub(r"[^A-Za-z0-9]+", "-", env.get("device", "gpu")).strip("-").lower()
        kind = "-sweep" if args.sweep else ""
        out = REPO / "bench" / "results" / f"{dt.date.today().isoformat()}-{gpu_name}{kind}.txt"
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n", encoding="utf-8")
        record = results_record(suite, items, env, results, wall_s, sweep=bool(args.sweep))
        Path(out).with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n", "utf-8")
        print(f"\nwritten to {out} and {Path(out).with_suffix('.json').name}")

    ours = [r for (_, peer), r in zip(items, results, strict=True) if peer.startswith("ours")]
    return 0 if ours and all(r.get("status") == "ok" for r in ours) else 1


if __name__ == "__main__":
    sys.exit(main())
