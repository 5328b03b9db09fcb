"""The request traces (kvcourse.traces): the packaged Mooncake traces are the published files,
their block ids follow the prefix rule, bad files fail naming the line, and the synthetic
generator is seeded, lands in its documented bands and numbers blocks like the real traces."""

import dataclasses
import gzip
import hashlib
import json
import math
import re
from collections import Counter
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvcourse.traces import (
    MOONCAKE_TRACES,
    Trace,
    TraceRequest,
    load_mooncake_trace,
    load_trace_file,
    synthetic_prefix_trace,
)

DATA = resources.files("kvcourse").joinpath("data/mooncake")

# Statistics of the packaged traces, computed once with this module and pinned.
REAL = {
    "conversation": dict(
        duration_s=3536.999,
        mean_prompt_len=12035.0613,
        mean_output_len=342.6189,
        num_blocks=288_500,
        num_distinct_blocks=182_790,
        share_blocks_seen_once=0.7585,
    ),
    "synthetic": dict(
        duration_s=1022.025,
        mean_prompt_len=15325.4766,
        mean_output_len=149.1190,
        num_blocks=121_877,
        num_distinct_blocks=43_924,
        share_blocks_seen_once=0.5845,
    ),
}

# The lecture's synthetic trace (§8.4) and the bands synthetic_prefix_trace documents (seeds 0-19).
LECTURE = dict(num_requests=4157, duration_s=1440.0, mean_input=8709, mean_output=183, once=0.56)
BANDS = dict(mean_input=(8415, 9011), mean_output=(179, 187), once=(0.535, 0.585))


def readme_table():
    """``{name: (requests, uncompressed bytes, sha256)}`` read from the packaged README."""
    text = DATA.joinpath("README.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `(\w+)_trace\.jsonl\.gz` \| `[^`]+` \| ([\d,]+) \| ([\d,]+) \| `([0-9a-f]{64})`",
        text,
        flags=re.MULTILINE,
    )
    return {
        name: (int(n.replace(",", "")), int(b.replace(",", "")), sha) for name, n, b, sha in rows
    }


def assert_prefix_rule(trace):
    """Equal id ⇔ equal prefix, as far as ids can show it: every id sits at one position, always
    after the same parent id, and a partial last block is shared only by prompts of its length."""
    position, parent, partial = {}, {}, {}
    for r in trace.requests:
        assert len(r.block_ids) == math.ceil(r.prompt_len / trace.block_size)
        assert len(set(r.block_ids)) == len(r.block_ids)
        for k, block in enumerate(r.block_ids):
            assert position.setdefault(block, k) == k, f"id {block} at two positions"
            up = r.block_ids[k - 1] if k else None
            assert parent.setdefault(block, up) == up, f"id {block} after two parents"
        if r.prompt_len % trace.block_size:
            last = r.block_ids[-1]
            assert partial.setdefault(last, r.prompt_len) == r.prompt_len
    full_ids = {
        block
        for r in trace.requests
        for block in (r.block_ids if r.prompt_len % trace.block_size == 0 else r.block_ids[:-1])
    }
    assert not full_ids & set(partial), "a partial block's id also names a full block"


# ---------------------------------------------------------------------------- the real traces


def test_the_readme_lists_both_packaged_traces_and_a_notice_comes_with_them():
    assert set(readme_table()) == set(MOONCAKE_TRACES) == {"conversation", "synthetic"}
    notice = DATA.joinpath("NOTICE").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in notice
    assert "github.com/kvcache-ai/Mooncake" in notice
    assert "3b5a594133958449a1feaf1c9e0fc1b553e34a28" in notice


@pytest.mark.parametrize("name", MOONCAKE_TRACES)
def test_packaged_files_are_the_published_ones(name):
    requests, size, sha = readme_table()[name]
    raw = gzip.decompress(DATA.joinpath(f"{name}_trace.jsonl.gz").read_bytes())
    assert (len(raw), hashlib.sha256(raw).hexdigest()) == (size, sha)
    trace = load_mooncake_trace(name)
    assert trace.num_requests == requests
    assert trace.name == f"mooncake-{name}" and trace.block_size == 512


@pytest.mark.parametrize("name", MOONCAKE_TRACES)
def test_real_traces_follow_the_prefix_rule(name):
    assert_prefix_rule(load_mooncake_trace(name))


@pytest.mark.parametrize("name", MOONCAKE_TRACES)
def test_real_trace_statistics(name):
    trace = load_mooncake_trace(name)
    for field, want in REAL[name].items():
        assert getattr(trace, field) == pytest.approx(want, abs=1e-4), field
    assert trace.requests[0].arrival_s == 0.0
    arrivals = [r.arrival_s for r in trace.requests]
    assert arrivals == sorted(arrivals)
    assert trace.block_id_lists() == [r.block_ids for r in trace.requests]
    assert trace.num_blocks == sum(map(len, trace.block_id_lists()))


def test_conversation_trace_shares_one_system_block_and_is_cached_and_immutable():
    trace = load_mooncake_trace()
    assert load_mooncake_trace("conversation") is trace
    assert {r.block_ids[0] for r in trace.requests} == {0}
    first = trace.requests[0]
    assert first == TraceRequest(0.0, 6758, 500, tuple(range(14)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.prompt_len = 1
    assert isinstance(trace.requests, tuple) and isinstance(first.block_ids, tuple)


# §8's trace facts beside the lecture's (mean input ≈ 47× mean output, ≈ 720 per request, a
# few blocks in a great many requests): (mean ÷ mean, mean per request, median per request,
# requests holding the most used block, the next).
TRACE_FACTS = {
    "conversation": (35.1, 371.3, 26.4, 12_031, 43),
    "synthetic": (102.8, 2045.7, 111.6, 24, 24),
}


@pytest.mark.parametrize("name", MOONCAKE_TRACES)
def test_prompts_dwarf_outputs_and_reuse_is_uneven(name):
    trace = load_mooncake_trace(name)
    prompts = [r.prompt_len for r in trace.requests]
    outputs = [r.output_len for r in trace.requests]
    assert min(outputs) > 0  # §8 divides by every output length
    per_request = sorted(p / o for p, o in zip(prompts, outputs, strict=True))
    n = len(per_request)
    median = (per_request[(n - 1) // 2] + per_request[n // 2]) / 2
    holding = Counter(b for r in trace.requests for b in set(r.block_ids))
    top, following = sorted(holding.values(), reverse=True)[:2]
    got = (
        round(trace.mean_prompt_len / trace.mean_output_len, 1),
        round(sum(per_request) / n, 1),
        round(median, 1),
        top,
        following,
    )
    assert got == TRACE_FACTS[name]
    assert trace.share_blocks_seen_once > 0.5  # most blocks are used by one request only


def test_unknown_names_raise():
    with pytest.raises(ValueError, match=r"'toolagent'.*'conversation', 'synthetic'"):
        load_mooncake_trace("toolagent")
    with pytest.raises(TypeError, match="must be a str"):
        load_mooncake_trace(["conversation"])


# ---------------------------------------------------------------------------- subsets


def test_head_and_window():
    trace = load_mooncake_trace("synthetic")
    head = trace.head(100)
    assert head.requests == trace.requests[:100] and head.block_size == 512
    assert trace.head(10**6).requests == trace.requests
    empty = trace.head(0)
    assert (empty.num_requests, empty.duration_s, empty.num_distinct_blocks) == (0, 0.0, 0)
    assert math.isnan(empty.mean_prompt_len) and math.isnan(empty.share_blocks_seen_once)

    window = trace.window(100.0, 200.0)
    assert window.requests == tuple(r for r in trace.requests if 100.0 <= r.arrival_s < 200.0)
    assert 0 < window.num_requests < trace.num_requests and window.duration_s < 100.0
    assert trace.window(0, math.inf).requests == trace.requests
    assert trace.window(500, 600).requests + trace.window(600, 700).requests == (
        trace.window(500, 700).requests
    )
    assert trace.window(10**6, 10**7).num_requests == 0


def test_subset_arguments_are_checked():
    trace = load_mooncake_trace("synthetic")
    with pytest.raises(ValueError, match="zero or more"):
        trace.head(-1)
    with pytest.raises(TypeError, match="must be an int"):
        trace.head(2.5)
    with pytest.raises(ValueError, match="after start_s"):
        trace.window(10, 10)
    with pytest.raises(ValueError, match="finite"):
        trace.window(math.inf, math.inf)
    with pytest.raises(TypeError, match="seconds"):
        trace.window("0", 10)


def test_trace_records_check_themselves():
    ok = TraceRequest(1.0, 600, 5, (0, 1))
    with pytest.raises(ValueError, match="512 tokens need 2"):
        Trace("t", 512, (TraceRequest(0.0, 600, 5, (0,)),))
    with pytest.raises(ValueError, match="sort by arrival"):
        Trace("t", 512, (ok, TraceRequest(0.5, 10, 5, (2,))))
    with pytest.raises(TypeError, match="tuple of TraceRequest"):
        Trace("t", 512, [ok])
    with pytest.raises(ValueError, match="block_size must be positive"):
        Trace("t", 0, ())
    with pytest.raises(TypeError, match="tuple of ints"):
        TraceRequest(0.0, 600, 5, [0, 1])
    with pytest.raises(ValueError, match="zero or more"):
        TraceRequest(0.0, -1, 5, ())
    with pytest.raises(ValueError, match="finite"):
        TraceRequest(math.nan, 1, 5, (0,))


# ---------------------------------------------------------------------------- files of your own


def write_lines(path, rows, *, compress=False):
    text = "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)
    path.write_bytes(gzip.compress(text.encode()) if compress else text.encode())
    return path


def as_rows(trace):
    return [
        dict(
            timestamp=round(r.arrival_s * 1000),
            input_length=r.prompt_len,
            output_length=r.output_len,
            hash_ids=list(r.block_ids),
        )
        for r in trace.requests
    ]


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_file_of_your_own_reads_back(tmp_path, compress):
    sample = load_mooncake_trace("conversation").head(200)
    suffix = ".jsonl.gz" if compress else ".jsonl"
    path = write_lines(tmp_path / f"mine{suffix}", as_rows(sample), compress=compress)
    mine = load_trace_file(path)
    assert mine.requests == sample.requests and mine.name == "mine"
    assert load_trace_file(str(path), name="x").name == "x"


GOOD = dict(timestamp=0, input_length=600, output_length=3, hash_ids=[0, 1])


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(GOOD, timestamp=-5), "line 2: timestamp"),
        ({k: v for k, v in GOOD.items() if k != "hash_ids"}, "line 2: missing field.*hash_ids"),
        ({k: v for k, v in GOOD.items() if k != "timestamp"}, "line 2: missing field.*timestamp"),
        (dict(GOOD, hash_ids=[0, 1, 2]), r"line 2: 3 hash_ids for input_length 600.*= 2"),
        (dict(GOOD, input_length=-1), "line 2: input_length must be a non-negative int"),
        (dict(GOOD, output_length=2.5), "line 2: output_length must be a non-negative int"),
        (dict(GOOD, hash_ids=[0, "1"]), "line 2: hash_ids must be a list"),
        ('{"timestamp": 0, "input_length": 600,', "line 2: not valid JSON"),
        ("[1, 2, 3]", "line 2: expected a JSON object"),
    ],
)
def test_bad_lines_raise_naming_the_line(tmp_path, bad, message):
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, bad, GOOD])
    with pytest.raises(ValueError, match=message):
        load_trace_file(path)


def test_unsorted_timestamps_and_blank_lines(tmp_path):
    path = write_lines(
        tmp_path / "t.jsonl", [dict(GOOD, timestamp=10), "", dict(GOOD, timestamp=5)]
    )
    with pytest.raises(ValueError, match=r"t\.jsonl, line 3: timestamps not sorted"):
        load_trace_file(path)
    path = write_lines(tmp_path / "ok.jsonl", [GOOD, "", dict(GOOD, timestamp=1500)])
    assert [r.arrival_s for r in load_trace_file(path).requests] == [0.0, 1.5]
    with pytest.raises(ValueError, match=r"line 1: 2 hash_ids.*= 1"):
        load_trace_file(path, block_size=1024)


def test_file_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError, match="path must be"):
        load_trace_file(3)
    with pytest.raises(TypeError, match="name must be"):
        load_trace_file(tmp_path / "x.jsonl", name=1)
    with pytest.raises(ValueError, match="block_size must be positive"):
        load_trace_file(tmp_path / "x.jsonl", block_size=0)
    with pytest.raises(FileNotFoundError):
        load_trace_file(tmp_path / "x.jsonl")


# ---------------------------------------------------------------------------- the generator


def test_generator_is_seeded():
    assert synthetic_prefix_trace(500, seed=3) == synthetic_prefix_trace(500, seed=3)
    one, other = synthetic_prefix_trace(500, seed=3), synthetic_prefix_trace(500, seed=4)
    assert one.block_id_lists() != other.block_id_lists()
    assert [r.prompt_len for r in one.requests] != [r.prompt_len for r in other.requests]


def test_generator_defaults_land_near_the_lecture_trace():
    trace = synthetic_prefix_trace()
    assert trace.num_requests == LECTURE["num_requests"] and trace.block_size == 512
    assert trace.duration_s == pytest.approx(LECTURE["duration_s"], abs=1e-3)
    assert trace.mean_prompt_len == pytest.approx(LECTURE["mean_input"], rel=0.02)
    assert trace.mean_output_len == pytest.approx(LECTURE["mean_output"], rel=0.02)
    assert trace.share_blocks_seen_once == pytest.approx(LECTURE["once"], abs=0.03)
    assert_prefix_rule(trace)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generator_stays_in_its_documented_bands(seed):
    trace = synthetic_prefix_trace(seed=seed)
    assert trace.num_requests == LECTURE["num_requests"]
    assert trace.duration_s == pytest.approx(LECTURE["duration_s"], abs=1e-3)
    for value, (lo, hi) in (
        (trace.mean_prompt_len, BANDS["mean_input"]),
        (trace.mean_output_len, BANDS["mean_output"]),
        (trace.share_blocks_seen_once, BANDS["once"]),
    ):
        assert lo <= value <= hi


def test_more_turns_mean_more_reuse_and_one_turn_reuses_only_system_prompts():
    few = synthetic_prefix_trace(2000, mean_turns=1.5, seed=0)
    many = synthetic_prefix_trace(2000, mean_turns=4.0, seed=0)
    assert many.share_blocks_seen_once < few.share_blocks_seen_once
    single = synthetic_prefix_trace(1000, mean_turns=1, system_prompt_len=1024, seed=0)
    counts = Counter(block for r in single.requests for block in r.block_ids)
    shared = {block for block, c in counts.items() if c > 1}
    assert shared <= {r.block_ids[k] for r in single.requests for k in (0, 1)}


@settings(max_examples=30, deadline=None)
@given(
    num_requests=st.integers(1, 300),
    mean_turns=st.floats(1.0, 6.0),
    system_prompt_len=st.integers(0, 3000),
    context=st.floats(2.0, 20_000.0),
    block_size=st.sampled_from([16, 100, 512]),
    seed=st.integers(0, 2**32),
)
def test_generator_follows_the_prefix_rule_for_any_knobs(
    num_requests, mean_turns, system_prompt_len, context, block_size, seed
):
    mean_input = system_prompt_len + 150 + (mean_turns - 1) * 333 + context
    trace = synthetic_prefix_trace(
        num_requests,
        duration_s=60.0,
        mean_prompt_len=mean_input,
        mean_turns=mean_turns,
        system_prompt_len=system_prompt_len,
        block_size=block_size,
        seed=seed,
    )
    assert trace.num_requests == num_requests and trace.block_size == block_size
    assert trace.requests[0].arrival_s == 0.0
    assert trace.duration_s == (pytest.approx(60.0) if num_requests > 1 else 0.0)
    assert_prefix_rule(trace)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(num_requests=0), ValueError, "num_requests must be positive"),
        (dict(num_requests=1.5), TypeError, "num_requests must be an int"),
        (dict(duration_s=0), ValueError, "duration_s must be a positive"),
        (dict(mean_turns=0.5), ValueError, "mean_turns must be a finite number >= 1"),
        (dict(mean_output_len="183"), TypeError, "mean_output_len must be a number"),
        (dict(num_system_prompts=0), ValueError, "num_system_prompts must be positive"),
        (dict(system_prompt_len=-1), ValueError, "system_prompt_len must be zero or more"),
        (dict(block_size=0), ValueError, "block_size must be positive"),
        (dict(seed=-1), ValueError, "seed must be zero or more"),
        (dict(mean_prompt_len=1000), ValueError, "no room for a context"),
    ],
)
def test_generator_arguments_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        synthetic_prefix_trace(**kwargs)
