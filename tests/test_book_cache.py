"""The book's one execution cache (book/editions.py): every build, ``make book``'s and the tests',
executes pages into ``_build/.jupyter_cache``; the cache is dropped when anything a page reads
changes, and only then."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def editions(tmp_path, monkeypatch):
    """book/editions.py working on a small checkout under tmp_path."""
    spec = importlib.util.spec_from_file_location("editions_under_test", ROOT / "book/editions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "lib" / "kvcourse" / "__pycache__").mkdir(parents=True)
    (tmp_path / "lib" / "kvcourse" / "serving.py").write_text("RATE = 1\n")
    (tmp_path / "lib" / "kvcourse" / "__pycache__" / "serving.cpython-311.pyc").write_bytes(b"1")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "gpu.json").write_text("{}")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    return module


def test_every_input_named_exists_in_the_checkout(editions):
    for name in editions.BOOK_INPUTS:
        assert (ROOT / name).exists(), name
    # §4 reads the GPU results and the instructors' page grades the samples with the grader
    assert {"lib", "bench/results", "grading/kvcourse_grader", "solutions"} <= set(
        editions.BOOK_INPUTS
    )


def test_the_fingerprint_follows_contents_and_names_not_byte_code(editions, tmp_path):
    first = editions.inputs_hash()
    (tmp_path / "lib/kvcourse/__pycache__/serving.cpython-311.pyc").write_bytes(b"2")
    assert editions.inputs_hash() == first
    (tmp_path / "bench/results/gpu.json").write_text('{"us": 11.2}')
    second = editions.inputs_hash()
    assert second != first
    (tmp_path / "lib/kvcourse/serving.py").rename(tmp_path / "lib/kvcourse/sched.py")
    assert editions.inputs_hash() not in (first, second)


def test_the_cache_is_dropped_when_a_page_input_changes_and_only_then(editions, tmp_path):
    cache = tmp_path / "_build" / ".jupyter_cache"
    editions._drop_stale_cache(tmp_path / "_build")  # first build: no fingerprint yet
    cache.mkdir(parents=True)
    (cache / "page.ipynb").write_text("executed")
    editions._drop_stale_cache(tmp_path / "_build")
    assert (cache / "page.ipynb").exists(), "nothing changed, yet the cache was dropped"
    (tmp_path / "lib/kvcourse/serving.py").write_text("RATE = 2\n")
    editions._drop_stale_cache(tmp_path / "_build")
    assert not cache.exists(), "the library changed, yet the pages' outputs were kept"
    stamp = (tmp_path / "_build" / ".inputs-hash").read_text().strip()
    assert stamp == editions.inputs_hash()
