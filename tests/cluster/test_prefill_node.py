"""The one prefill-node record every cluster model prices its prefill on
(kvcourse.cluster.prefill_node), and the shared fraction and seconds checks it uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcourse._checks import check_fraction, check_seconds
from kvcourse.cluster import PrefillNode
from kvcourse.sizing import compute_seconds
from kvcourse.specs import A800_80GB, H200, LLAMA2_70B, OPT_13B


def test_the_default_is_the_lectures_node():
    node = PrefillNode()
    assert (node.model, node.gpu, node.num_gpus, node.utilization) == (
        LLAMA2_70B,
        A800_80GB,
        8,
        0.6,
    )
    assert node.flops_per_second == 8 * 312e12 * 0.6
    assert node.memory_bytes == 8 * 80 * 10**9
    # The same division, in the same order, as kvcourse.sizing's: bit for bit.
    for flops in (1.0, 137.4e9, 3.3e15):
        same = compute_seconds(flops, num_gpus=8, peak_flops=312e12, utilization=0.6)
        assert node.seconds(flops) == same
    assert node.seconds(0) == 0.0


def test_other_nodes_scale_as_expected():
    small = PrefillNode(OPT_13B, H200, num_gpus=2, utilization=np.float64(0.5))
    assert math.isclose(small.seconds(1e15), 1e15 / (2 * H200.peak_flops * 0.5))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(model="LLaMA2-70B"), TypeError, "model must be a ModelSpec"),
        (dict(gpu="A800"), TypeError, "gpu must be a GPUSpec"),
        (dict(num_gpus=0), ValueError, "num_gpus must be positive"),
        (dict(num_gpus=2.0), TypeError, "num_gpus must be an int"),
        (dict(utilization=60), ValueError, r"utilization must be a fraction in \(0, 1\]"),
        (dict(utilization=0.0), ValueError, "utilization must be a fraction"),
        (dict(utilization="0.6"), TypeError, "utilization must be a fraction such as 0.6"),
        (dict(utilization=True), TypeError, "utilization must be a fraction"),
    ],
)
def test_a_bad_node_is_refused_once_clearly(kwargs, error, match):
    with pytest.raises(error, match=match):
        PrefillNode(**kwargs)


def test_seconds_refuses_what_is_no_work():
    for bad in (-1.0, math.inf, math.nan, "1e9"):
        with pytest.raises(ValueError, match="flops must be a finite number >= 0"):
            PrefillNode().seconds(bad)


def test_the_shared_checks():
    assert check_fraction("share", 1) == 1.0 and check_fraction("share", 0.25) == 0.25
    with pytest.raises(ValueError, match=r"share must be a fraction in \(0, 1\] such as 0.5"):
        check_fraction("share", 1.5, "0.5")
    with pytest.raises(ValueError, match="fraction"):
        check_fraction("share", math.nan)
    assert check_seconds("wait", 0) == 0.0 and check_seconds("wait", np.float32(2.5)) == 2.5
    for bad in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="wait must be a finite number of seconds >= 0"):
            check_seconds("wait", bad)
    with pytest.raises(TypeError, match="wait must be a number of seconds"):
        check_seconds("wait", "1 s")
