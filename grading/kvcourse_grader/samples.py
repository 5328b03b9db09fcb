"""Sample submissions, built from the current student version so they never drift.

``grading/samples/<assignment>.py`` describes each sample student in a dict ``SAMPLES`` of
:class:`Sample`: which solution cells hold what, and which test cells must pass. This module turns
that into notebooks: it copies the student version from ``notebooks/`` and replaces the source of
the named solution cells, either with the instructor's solution (taken from ``solutions/``, with
the ``### BEGIN/END SOLUTION`` lines dropped) or with code written in the description.

The tests grade these notebooks with the real nbgrader, and ``kvcourse-grade samples`` writes them
out for a dry run of the whole pipeline.

What several assignments' samples share lives here too, so that each description holds only what
is its own: the two samples every assignment has (:func:`basic_samples`), :func:`tests_of`, a
solution with one small mistake (:func:`replaced`), a first cell that raises
(:func:`raises_first`), the code of always-equal values (:data:`ANYTHING`, :data:`WHATEVER`,
:data:`AGREEABLE`) and of the tricks on the grader (:data:`FORGE_SCORE`,
:data:`SWALLOW_ERRORS`), and students whose code loops, kills its kernel or grabs memory
(:func:`loops_forever`, :func:`kills_kernel`, :func:`grabs_memory`).
"""

from __future__ import annotations

import ast
import copy
import runpy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

#: Use the instructor's solution for this cell.
SOLUTION = "<solution>"
#: Keep the student version's stub for this cell.
STUB = "<stub>"
#: In ``passes``: every test cell.
ALL = "<all>"

CellCode = str | Callable[[str], str]


@dataclass(frozen=True)
class Sample:
    """One sample student.

    ``cells`` maps a solution cell's ``grade_id`` to its new source: :data:`SOLUTION`,
    :data:`STUB`, a string of code, or a function from the solution's code to new code. Cells not
    named take ``default``. ``drop`` names cells (any ``grade_id``) the student deleted;
    ``appended`` holds the code of cells the student added at the end. ``passes`` lists the
    test cells (``grade_id``) expected to score, or is :data:`ALL`.
    """

    about: str
    default: str = SOLUTION
    cells: Mapping[str, CellCode] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    passes: tuple[str, ...] | str = ALL
    appended: tuple[str, ...] = ()


def notebook_path(root: Path, directory: str, assignment: str) -> Path:
    return root / directory / assignment / f"{assignment}.ipynb"


def spec_path(root: Path, assignment: str) -> Path:
    return root / "grading" / "samples" / f"{assignment}.py"


def load_samples(root: Path, assignment: str) -> dict[str, Sample]:
    """The ``SAMPLES`` of ``grading/samples/<assignment>.py``."""
    path = spec_path(root, assignment)
    if not path.is_file():
        raise FileNotFoundError(f"no sample description for {assignment}: {path}")
    samples = runpy.run_path(str(path))["SAMPLES"]
    for student, sample in samples.items():
        if not isinstance(sample, Sample):
            raise TypeError(f"{path}: SAMPLES[{student!r}] is not a Sample")
    return dict(samples)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def solution_code(source: str) -> str:
    """A solution cell's code without the ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines."""
    markers = ("BEGIN SOLUTION", "END SOLUTION")
    lines = source.split("\n")
    return "\n".join(line for line in lines if not any(m in line for m in markers))


def grade_points(source_nb) -> dict[str, float]:
    """Points of every test (grade, non-solution) cell of a source notebook, by ``grade_id``."""
    points = {}
    for cell in source_nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            points[meta["grade_id"]] = float(meta.get("points", 0))
    return points


def expected_scores(root: Path, assignment: str, sample: Sample) -> dict[str, float]:
    """Points each test cell should score for ``sample`` (0 for the cells it should fail)."""
    source = nbformat.read(notebook_path(root, "solutions", assignment), as_version=4)
    points = grade_points(source)
    passing = set(points) if sample.passes == ALL else set(sample.passes)
    unknown = passing - set(points)
    if unknown:
        raise KeyError(f"{assignment}: no test cells named {sorted(unknown)}")
    return {grade_id: (p if grade_id in passing else 0.0) for grade_id, p in points.items()}


def build_sample(root: Path, assignment: str, sample: Sample):
    """The submission notebook for ``sample``: the student version with its cells replaced."""
    release = nbformat.read(notebook_path(root, "notebooks", assignment), as_version=4)
    source = nbformat.read(notebook_path(root, "solutions", assignment), as_version=4)
    solutions = {
        _grade_id(cell): solution_code(cell.source)
        for cell in source.cells
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution")
    }
    unknown = set(sample.cells) - set(solutions)
    if unknown:
        raise KeyError(f"{assignment}: no solution cells named {sorted(unknown)}")
    notebook = copy.deepcopy(release)
    unknown = set(sample.drop) - {_grade_id(cell) for cell in notebook.cells}
    if unknown:
        raise KeyError(f"{assignment}: no cells named {sorted(unknown)} to drop")
    notebook.cells = [cell for cell in notebook.cells if _grade_id(cell) not in sample.drop]
    for cell in notebook.cells:
        grade_id = _grade_id(cell)
        if grade_id not in solutions:
            continue
        choice = sample.cells.get(grade_id, sample.default)
        if choice == SOLUTION:
            cell.source = solutions[grade_id]
        elif choice == STUB:
            pass
        elif callable(choice):
            cell.source = choice(solutions[grade_id])
        else:
            cell.source = str(choice).strip("\n")
    notebook.cells += [nbformat.v4.new_code_cell(code.strip("\n")) for code in sample.appended]
    return notebook


def write_samples(root: Path, assignment: str, out: Path) -> dict[str, Path]:
    """Write every sample of ``assignment`` as ``<out>/<student>.ipynb``; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for student, sample in load_samples(root, assignment).items():
        path = out / f"{student}.ipynb"
        nbformat.write(build_sample(root, assignment, sample), path)
        written[student] = path
    return written


# ------------------------------------------------------------- what the sample descriptions share
def basic_samples() -> dict[str, Sample]:
    """The two samples every assignment has: the instructor's solution (full marks) and the
    student version as released (no points)."""
    return {
        "correct": Sample(about="every part solved (the instructor's solution)"),
        "untouched": Sample(about="the student version as released", default=STUB, passes=()),
    }


def tests_of(*names: str) -> tuple[str, ...]:
    """The visible and the hidden test cell (``test_<name>``, ``hidden_<name>``) of each part."""
    return tuple(f"{kind}_{name}" for name in names for kind in ("test", "hidden"))


def replaced(old: str, new: str) -> Callable[[str], str]:
    """A cell's code as a function of the solution: the solution with ``old`` (which must be in
    it) replaced by ``new``. The way to write a sample that makes one small mistake."""

    def change(solution: str) -> str:
        if old not in solution:
            raise ValueError(f"the solution no longer holds {old!r}: update the sample")
        return solution.replace(old, new)

    return change


def raises_first(code: str) -> str:
    """A cell's code after an import that fails: the cell raises at top level and defines
    nothing."""
    return "import kvcourse.no_such_module\n\n" + code


#: Code that defines ``Anything``: an int that claims to equal everything.
ANYTHING = '''
class Anything(int):
    """An int that claims to equal everything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__
'''

#: Code that defines ``Whatever``: equal to everything, registered as a real number, 0.0 as a
#: float.
WHATEVER = '''
import numbers


class Whatever:
    """Equal to everything, registered as a real number, 0.0 as a float."""

    def __eq__(self, other):
        return True

    def __float__(self):
        return 0.0

    __hash__ = object.__hash__


numbers.Real.register(Whatever)
'''

#: Code that defines ``Agreeable``: a string equal to every other.
AGREEABLE = '''
class Agreeable(str):
    """A string equal to every other."""

    def __eq__(self, other):
        return True

    __hash__ = str.__hash__
'''

#: What a copycat student defines first: ``_copy(f)``, a new function object with ``f``'s code, and
#: ``_copied_class(name, cls)``, a class of such copies, both made before the tests can switch the
#: library's originals off (the hidden cells' watch must catch them).
COPY_TOOLS = """
import types


def _copy(function):
    return types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__
    )


def _copied_class(name, source):
    namespace = {}
    for key, member in vars(source).items():
        if isinstance(member, property):
            namespace[key] = property(_copy(member.fget))
        elif isinstance(member, types.FunctionType):
            namespace[key] = _copy(member)
        elif key not in ("__dict__", "__weakref__"):
            namespace[key] = member
    return type(name, (), namespace)
"""


def pasted_reference(module: str, renames: Mapping[str, str], retyped: bool = False) -> str:
    """The library's reference as a student would paste it into a cell: the source of
    ``module`` (its imports named at package level, its docstring left out) with the classes and
    functions in ``renames`` given the assignment's names. With ``retyped``, every function's
    arguments and local variables get other names too, as a student who retypes the reference
    would. Read from the library's file each time, so the sample never drifts from it; the hidden
    tests' watch must know either for a copy."""
    import importlib
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise KeyError(f"no library module {module!r} to paste")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    body = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module's docstring
        if isinstance(node, ast.ImportFrom) and (node.module or "").count(".") >= 2:
            package = importlib.import_module(".".join(node.module.split(".")[:2]))
            if all(hasattr(package, alias.name) for alias in node.names):
                node.module = package.__name__
        body.append(node)
    pasted = ast.Module(body=body, type_ignores=[])
    for node in ast.walk(pasted):
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in renames:
            node.name = renames[node.name]
        elif isinstance(node, ast.Name) and node.id in renames:
            node.id = renames[node.id]
    if retyped:
        for node in ast.walk(pasted):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                _rename_locals(node)
    return ast.unparse(pasted)


def _rename_locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    """Give ``function``'s arguments and the names it assigns (in it and in its lambdas and
    comprehensions) other names, consistently."""
    declared = {
        name
        for node in ast.walk(function)
        if isinstance(node, ast.Global | ast.Nonlocal)
        for name in node.names
    }
    own = [a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)]
    for node in ast.walk(function):
        if node is not function and isinstance(node, ast.Lambda):
            own += [a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)]
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.append(node.id)
    new = {name: f"v{i}_{name[::-1]}" for i, name in enumerate(dict.fromkeys(own))}
    for name in declared:
        new.pop(name, None)
    for node in ast.walk(function):
        if isinstance(node, ast.arg) and node.arg in new:
            node.arg = new[node.arg]
        elif isinstance(node, ast.Name) and node.id in new:
            node.id = new[node.id]


#: A statement that forges a score: nbgrader reads a test cell's first ``execute_result`` as its
#: score, and a string there would mean full points (needs ``import sys``).
FORGE_SCORE = 'sys.displayhook("full marks")'

#: A statement that asks IPython to swallow the failing assertion instead of showing it.
SWALLOW_ERRORS = "get_ipython().set_custom_exc((AssertionError,), lambda *args, **kwargs: None)"


def loops_forever(definition: str) -> str:
    """A function (its ``def`` line given) that never returns and ignores the interrupt sent at
    the cell timeout, so the kernel has to be stopped."""
    return f"""
import time


{definition}
    while True:  # an infinite loop that also ignores the interrupt sent at the timeout
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            pass
"""


def kills_kernel(definition: str) -> str:
    """A function (its ``def`` line given) that ends the kernel process on the spot."""
    return f"""
import os


{definition}
    os._exit(3)  # the kernel process ends on the spot
"""


def grabs_memory(solution: str, gib: int = 8) -> str:
    """The solution, after grabbing ``gib`` GiB first thing in the function (after its
    docstring): fine without a memory limit, a ``MemoryError`` under the grader's."""
    grab = f'    """\n    hoard = bytearray({gib} * 2**30)\n    del hoard\n'
    body = solution.replace('    """\n', grab, 1)
    if "hoard" not in body:
        raise ValueError("grabs_memory needs a function whose docstring ends on its own line")
    return body


def floods_output(solution: str, mib: int = 64) -> str:
    """The solution, after printing ``mib`` MiB at top level: the grader keeps only the start of
    the output while the cell runs, so grading neither stalls nor runs out of memory."""
    flood = (
        "import sys\n\n"
        f"for _ in range({mib}):\n"
        "    sys.stdout.write('flood ' * 174762 + '\\n')  # about 1 MiB a line\n\n"
    )
    return flood + solution
