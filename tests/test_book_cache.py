"""The book's execution cache, page by page (book/_ext/page_inputs.py, book/editions.py): a page
is executed again, and read again by Sphinx, exactly when something it reads has changed."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext" / "page_inputs.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


page_inputs = _load(EXT, "page_inputs_under_test")

#: What makes a MyST page a notebook for MyST-NB, as the book's pages start.
HEADER = (
    "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
    "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n"
)
#: A checkout of two pages: one uses serving's RATE through the package's re-export, one only
#: sizing; serving also imports a helper module.
MINI = {
    "pyproject.toml": "[project]\n",
    "lib/kvcourse/__init__.py": '"""kvcourse."""\n',
    "lib/kvcourse/sizing.py": "GIB = 2**30\n",
    "lib/kvcourse/serving/__init__.py": "from kvcourse.serving.rates import RATE\n",
    "lib/kvcourse/serving/rates.py": "from kvcourse.units import per_s\n\nRATE = per_s(1)\n",
    "lib/kvcourse/units.py": "def per_s(x):\n    return x\n",
    "lib/kvcourse/unused.py": "X = 1\n",
    "bench/results/run.txt": "12 us\n",
    "book/rates.md": (
        HEADER + "# Rates\n\n```{code-cell} ipython3\n:tags: [hide-input]\n\n"
        "from kvcourse.serving import RATE\n\nprint('rate', RATE)\n```\n"
    ),
    "book/sizes.md": (
        HEADER + "# Sizes\n\n```{code-cell} ipython3\nfrom pathlib import Path\n\n"
        "import kvcourse.sizing\n\nroot = Path.cwd().parent\n"
        "print((root / 'bench' / 'results' / 'run.txt').exists())\n"
        "print('gib', kvcourse.sizing.GIB)\n```\n"
    ),
    "book/prose.md": "# Prose only\n\nNo code here.\n",
}


@pytest.fixture
def mini(tmp_path):
    for name, text in MINI.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_page_reads_the_modules_it_uses_the_paths_it_names_and_the_pins(mini):
    assert page_inputs.inputs_of(mini / "book/rates.md", mini) == [
        "lib/kvcourse/__init__.py",
        "lib/kvcourse/serving/__init__.py",
        "lib/kvcourse/serving/rates.py",
        "lib/kvcourse/units.py",
        "pyproject.toml",
    ]
    assert page_inputs.inputs_of(mini / "book/sizes.md", mini) == [
        "bench/results/run.txt",
        "lib/kvcourse/__init__.py",
        "lib/kvcourse/sizing.py",
        "pyproject.toml",
    ]
    assert [p.name for p in page_inputs.executed_pages(mini)] == ["rates.md", "sizes.md"]


def test_a_change_moves_the_fingerprints_of_the_pages_that_read_it_and_no_others(mini):
    before = page_inputs.page_fingerprints(mini)
    (mini / "lib/kvcourse/units.py").write_text("def per_s(x):\n    return 2 * x\n")
    after = page_inputs.page_fingerprints(mini)
    assert after["book/rates.md"] != before["book/rates.md"]
    assert after["book/sizes.md"] == before["book/sizes.md"]
    (mini / "lib/kvcourse/unused.py").write_text("X = 2\n")
    (mini / "lib/kvcourse/__pycache__").mkdir()
    (mini / "lib/kvcourse/__pycache__/sizing.cpython-311.pyc").write_bytes(b"1")
    assert page_inputs.page_fingerprints(mini) == after
    (mini / "bench/results/run.txt").write_text("11 us\n")
    assert page_inputs.page_fingerprints(mini)["book/sizes.md"] != after["book/sizes.md"]


def test_the_books_pages_read_what_they_show():
    """On this checkout: §4 shows the GPU results, the instructors' page grades with the grader,
    a leaf drawing module reaches only its page, and every data folder has its reader."""
    inputs = {p.name: page_inputs.inputs_of(p) for p in page_inputs.executed_pages()}
    assert "bench/results" in inputs["04_paged_attention.md"]
    assert {"grading/kvcourse_grader", "grading/samples", "solutions"} <= set(
        inputs["instructors.md"]
    )
    readers = [p for p, found in inputs.items() if "lib/kvcourse/viz/kernel_results.py" in found]
    assert readers == ["04_paged_attention.md"]
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT / "lib/kvcourse/data").iterdir()}
    assert data == set(page_inputs.DATA_OF.values())
    assert all(page_inputs._module_file(m, ROOT) for m in page_inputs.DATA_OF)


def test_sphinx_reads_again_the_pages_whose_inputs_moved(mini, monkeypatch):
    monkeypatch.setattr(page_inputs, "ROOT", mini)

    class Env:
        found_docs = {"book/rates", "book/sizes", "book/prose"}

        @staticmethod
        def doc2path(docname):
            return str(mini / f"{docname}.md")

    env = Env()
    assert page_inputs._outdated(None, env, set(Env.found_docs), set(), set()) == []
    assert page_inputs._outdated(None, env, set(), set(), set()) == []
    (mini / "lib/kvcourse/serving/rates.py").write_text("RATE = 3\n")
    assert page_inputs._outdated(None, env, set(), set(), set()) == ["book/rates"]
    assert page_inputs._outdated(None, env, set(), set(), set()) == []


def _cache_page(store, path: Path) -> None:
    """Put an executed copy of a page in the cache, as MyST-NB does."""
    from jupyter_cache.base import CacheBundleIn

    notebook = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    )
    notebook.cells = [nbformat.v4.new_code_cell(path.read_text(), execution_count=1)]
    store.cache_notebook_bundle(CacheBundleIn(notebook, str(path)), check_validity=False)


def test_only_the_stale_pages_records_leave_the_cache(mini):
    from jupyter_cache import get_cache

    editions = _load(ROOT / "book/editions.py", "editions_under_test")
    home = mini / "_build"
    assert editions.drop_stale_pages(home, mini) == ["book/rates.md", "book/sizes.md"]
    store = get_cache(str(home / ".jupyter_cache"))
    for page in ("rates", "sizes"):
        _cache_page(store, mini / f"book/{page}.md")
    assert editions.drop_stale_pages(home, mini) == []
    assert len(store.list_cache_records()) == 2
    (mini / "lib/kvcourse/serving/rates.py").write_text("RATE = 3\n")
    assert editions.drop_stale_pages(home, mini) == ["book/rates.md"]
    assert [Path(r.uri).name for r in store.list_cache_records()] == ["sizes.md"]


@pytest.mark.slow
def test_a_library_change_reaches_the_html_of_the_pages_that_use_it_and_only_them(mini):
    """The stale case: a built book, then a change to a module one page uses; the next build
    executes that page alone and its HTML shows the new output."""
    (mini / "book/_ext").mkdir()  # its ROOT is the folder above book/_ext
    shutil.copy2(EXT, mini / "book/_ext/page_inputs.py")
    (mini / "book/conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(mini / 'book/_ext')!r})\n"
        "extensions = ['myst_nb', 'page_inputs']\n"
        "nb_execution_mode = 'cache'\n"
        f"nb_execution_cache_path = {str(mini / '_build/.jupyter_cache')!r}\n"
        "exclude_patterns = ['_build', '_ext']\nroot_doc = 'prose'\n"
    )
    editions = _load(ROOT / "book/editions.py", "editions_for_build")
    env = {"PYTHONPATH": str(mini / "lib"), "PATH": str(Path(sys.executable).parent)}

    def build() -> str:
        editions.drop_stale_pages(mini / "_build", mini)
        command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "book", "_build/html"]
        done = subprocess.run(
            command, cwd=mini, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout + done.stderr

    build()
    assert "rate 1" in (mini / "_build/html/rates.html").read_text()
    records = {Path(r.uri).name: r.pk for r in _records(mini)}
    (mini / "lib/kvcourse/serving/rates.py").write_text("RATE = 7\n")
    build()
    assert "rate 7" in (mini / "_build/html/rates.html").read_text()
    after = {Path(r.uri).name: r.pk for r in _records(mini)}
    assert after["sizes.md"] == records["sizes.md"], "a page the change does not reach ran again"
    assert after["rates.md"] != records["rates.md"]


def _records(root: Path) -> list:
    from jupyter_cache import get_cache

    return get_cache(str(root / "_build/.jupyter_cache")).list_cache_records()
