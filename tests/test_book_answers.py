"""Every exercise's answer is folded: a reader who wants to try an exercise first sees only the
question until they open its answer. The tests read the Markdown sources, so they run without
building the book.

What counts as an exercise and as its answer:

* An **exercise** starts at a heading that names it (``## Exercise 1, worked``), at a paragraph
  that opens with its bold name (``**Exercise 6 · 练习 6.**``), or at a fold whose title says
  "try it first" (§2's answers to its "Your turn" questions).
* Its **answer region** runs from there to the next heading of any level, or to the next
  exercise. Whatever the page shows
  in that region, a reader sees right under the question, so outside a fold it may show only
  prose: the question, its hints and the text that leads to the answer.
* A **fold** is a ``{dropdown}`` or an ``{admonition}`` with ``:class: dropdown``; whatever lies
  inside it is hidden until the reader opens it.
* A **code cell** in the region is folded when it is tagged ``hide-cell`` or ``remove-cell`` (code
  and output), or ``hide-output`` or ``remove-output`` (its output). Otherwise it must be
  *silent*: its code hidden (``hide-input`` or ``remove-input``), no ``print`` or ``display``,
  and its last statement not an expression that Jupyter would show (a ``glue`` call with
  ``display=False`` and the pages' ``glue_md`` show nothing).
* A **figure** (``{glue:figure}``, ``{figure}``, a ``{glue}`` directive) or a Markdown table
  outside a fold in the region is an answer in plain sight too.
* Every exercise has a folded worked answer in its region, whose title names it ("Worked
  answer", "Answers", "答案").
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from book_pages import toc_pages

ROOT = Path(__file__).resolve().parents[1]


HEADING = re.compile(r"^#{1,6} ")
EXERCISE_HEADING = re.compile(r"^#{1,6} .*\bExercise \d+")
EXERCISE_PARAGRAPH = re.compile(r"^\*\*Exercise \d+\b")
FENCE = re.compile(r"^(`{3,}|:{3,})\{([\w:-]+)\}(.*)$")
FIGURE_DIRECTIVES = {"glue:figure", "figure", "glue", "glue:any", "table", "list-table"}
FOLDED_TAGS = {"hide-cell", "remove-cell", "hide-output", "remove-output"}
HIDDEN_INPUT_TAGS = {"hide-input", "remove-input"}
ANSWER_TITLE = re.compile(r"answer|答案", re.I)
QUIET_CALLS = {"glue", "glue_md"}


@dataclass
class Block:
    """One piece of a page: prose, a code cell, a fold, a figure or another directive."""

    kind: str  # "prose", "heading", "code", "fold", "figure", "table", "directive"
    line: int  # 1-based line of its first line
    text: str  # the heading or first line, for prose
    title: str = ""  # a fold's title
    tags: frozenset[str] = frozenset()  # a code cell's tags
    code: str = ""  # a code cell's source


def cell_options(body: list[str]) -> tuple[set[str], list[str]]:
    """A code cell's tags and its code lines, from either option syntax of MyST notebooks."""
    tags: set[str] = set()
    if body and body[0].strip() == "---":
        end = body.index("---", 1)
        options, body = body[1:end], body[end + 1 :]
    else:
        options = []
        while body and body[0].startswith(":"):
            options.append(body.pop(0)[1:])
    for option in options:
        match = re.match(r"\s*tags:\s*\[(.*)\]", option)
        if match:
            tags |= {t.strip().strip("'\"") for t in match.group(1).split(",") if t.strip()}
    return tags, body


def blocks(source: str) -> list[Block]:
    """A page's top-level pieces in order (folds are one piece each, with what they hold)."""
    lines = source.splitlines()
    if lines and lines[0] == "---":  # the Jupytext header
        start = lines.index("---", 1) + 1
    else:
        start = 0
    out: list[Block] = []
    i = start
    in_paragraph = False
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            marks, name, argument = fence.groups()
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].rstrip() == marks), len(lines)
            )
            body = lines[i + 1 : end]
            if name == "code-cell":
                tags, code = cell_options(body)
                out.append(Block("code", i + 1, line, tags=frozenset(tags), code="\n".join(code)))
            elif name == "dropdown" or (
                name == "admonition" and any(b.strip() == ":class: dropdown" for b in body[:4])
            ):
                out.append(Block("fold", i + 1, line, title=argument.strip()))
            elif name in FIGURE_DIRECTIVES:
                out.append(Block("figure", i + 1, line))
            else:
                out.append(Block("directive", i + 1, line, title=argument.strip()))
            i, in_paragraph = end + 1, False
            continue
        if HEADING.match(line):
            out.append(Block("heading", i + 1, line))
            in_paragraph = False
        elif line.startswith("|"):
            if not out or out[-1].kind != "table" or not in_paragraph:
                out.append(Block("table", i + 1, line))
            in_paragraph = True
        elif line.strip() and not re.match(r"^\([\w-]+\)=$", line):
            if not in_paragraph or out[-1].kind != "prose":
                out.append(Block("prose", i + 1, line))
            in_paragraph = True
        else:
            in_paragraph = False
        i += 1
    return out


def quiet(code: str) -> bool:
    """Whether a code cell shows nothing when it runs: no print or display, and a last
    statement that is not an expression, or a glue call that does not display."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"print", "display"}:
            return False
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return True
    last = tree.body[-1].value
    if isinstance(last, ast.Call) and getattr(last.func, "id", None) in QUIET_CALLS:
        if last.func.id == "glue_md":
            return True
        return any(
            k.arg == "display" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in last.keywords
        )
    return False


def starts_exercise(block: Block) -> bool:
    """Whether a block opens an exercise (see the module's docstring)."""
    if block.kind == "heading":
        return bool(EXERCISE_HEADING.match(block.text))
    if block.kind == "prose":
        return bool(EXERCISE_PARAGRAPH.match(block.text))
    return block.kind == "fold" and "try it first" in block.title.lower()


def shown(block: Block) -> str | None:
    """What an unfolded block shows that could be an answer, in words; None for nothing."""
    if block.kind == "code":
        if block.tags & FOLDED_TAGS:
            return None
        if block.tags & HIDDEN_INPUT_TAGS and quiet(block.code):
            return None
        return "a code cell whose output (or code) is not folded"
    if block.kind == "figure":
        return f"a figure or glued output ({block.text.strip()})"
    if block.kind == "table":
        return "a table"
    return None


def exercises(pieces: list[Block]) -> list[tuple[Block, list[Block]]]:
    """Each exercise of a page with its answer region (see the module's docstring): up to the
    next heading or the next exercise. A fold titled "try it first" inside an exercise's region
    is that exercise's answer, not an exercise of its own."""
    starts = []
    region_end = -1
    for n, block in enumerate(pieces):
        if block.kind == "heading":
            region_end = -1
        if starts_exercise(block) and not (block.kind == "fold" and n < region_end):
            starts.append(n)
            region_end = len(pieces)
    found = []
    for k, n in enumerate(starts):
        stop = starts[k + 1] if k + 1 < len(starts) else len(pieces)
        end = next((m for m in range(n + 1, stop) if pieces[m].kind == "heading"), stop)
        found.append((pieces[n], pieces[n if pieces[n].kind == "fold" else n + 1 : end]))
    return found


def answer_problems(source: str) -> list[str]:
    """What a page shows of an exercise's answer outside a fold, and exercises without a folded
    answer; empty when every answer is folded."""
    problems = []
    for block, region in exercises(blocks(source)):
        name = block.text.strip()[:40] if block.kind != "fold" else block.title
        if not any(b.kind == "fold" and ANSWER_TITLE.search(b.title) for b in region):
            problems.append(f"line {block.line}: {name!r} has no folded worked answer")
        for piece in region:
            what = shown(piece)
            if what:
                problems.append(
                    f"line {piece.line}: {what}, under {name!r} (line {block.line}) before the "
                    "next heading; fold it with the answer (tags: [hide-cell]) or move it past "
                    "a heading"
                )
    return problems


@pytest.mark.parametrize("page", toc_pages())
def test_every_answer_is_folded(page):
    problems = answer_problems((ROOT / f"{page}.md").read_text(encoding="utf-8"))
    assert not problems, f"{page}:\n" + "\n".join(problems)


def test_the_pages_pose_exercises():
    """The rule above finds the exercises the lecture poses: all twelve on §14 (and the course's
    own two after them), and those the chapters pose beside their demos."""
    found = {}
    for page in toc_pages():
        pieces = blocks((ROOT / f"{page}.md").read_text(encoding="utf-8"))
        found[Path(page).stem] = len(exercises(pieces))
    assert found["14_exercises"] == 12 + 2
    assert found["06_scheduling_and_preemption"] == 2 and found["09_mooncake"] == 3


SAMPLE = """\
**Exercise 6 · 练习 6.** *How long?*

:::{dropdown} Worked answer · 参考答案 (try it first)
It takes {glue:md}`t`.
:::

```{code-cell} ipython3
print(answer)
```

## Next · 下一节
"""


def test_a_visible_cell_under_an_exercise_is_caught():
    problems = answer_problems(SAMPLE)
    assert len(problems) == 1 and "line 7" in problems[0]


YAML_OPTIONS = "---\ntags: [hide-cell]\nmystnb:\n  a: b\n---"


@pytest.mark.parametrize("options", [":tags: [hide-cell]", ":tags: [remove-output]", YAML_OPTIONS])
def test_a_folded_cell_passes(options):
    folded = SAMPLE.replace("ipython3\nprint", f"ipython3\n{options}\nprint")
    assert answer_problems(folded) == []


def test_a_hidden_quiet_cell_passes_and_a_hidden_printing_one_does_not():
    quiet_cell = SAMPLE.replace(
        "ipython3\nprint(answer)", 'ipython3\n:tags: [hide-input]\nglue("x", 1, display=False)'
    )
    assert answer_problems(quiet_cell) == []
    loud = SAMPLE.replace("ipython3\nprint", "ipython3\n:tags: [hide-input]\nprint")
    assert len(answer_problems(loud)) == 1
    shows = SAMPLE.replace("ipython3\nprint(answer)", "ipython3\n:tags: [hide-input]\nx")
    assert len(answer_problems(shows)) == 1


def test_a_figure_or_table_under_an_exercise_is_caught_and_a_heading_ends_the_region():
    glued = "```{glue:figure} fig\n:name: f\n\nA caption.\n```\n\n## Next"
    figure = SAMPLE.replace("## Next", glued)
    assert len(answer_problems(figure)) == 2
    table = SAMPLE.replace("## Next", "| a | b |\n|---|---|\n| 1 | 2 |\n\n## Next")
    assert len(answer_problems(table)) == 2
    after = SAMPLE.replace("```{code-cell}", "### Checked · 检验\n\n```{code-cell}")
    assert answer_problems(after) == []


def test_an_exercise_without_a_folded_answer_is_caught():
    bare = SAMPLE.replace(":::{dropdown} Worked answer · 参考答案 (try it first)", ":::{note}")
    assert any("no folded worked answer" in p for p in answer_problems(bare))
