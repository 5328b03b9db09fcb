"""nbgrader preprocessors that close three gaps of nbgrader 0.9.

``grading/nbgrader_config.py`` puts them into nbgrader's pipelines; they run inside the ordinary
``nbgrader autograde`` and ``nbgrader generate_feedback`` commands, so the formgrader gets the same
behaviour as ``kvcourse-grade``.

* :class:`RedactHiddenTests` (feedback): nbgrader copies the autograded notebook into the feedback,
  hidden tests and their tracebacks included. This removes the hidden regions and replaces the
  outputs of those cells with a fixed pass/fail line.
* :class:`DisablePartialCredit` (autograde): nbgrader scores a test cell by its first
  ``execute_result`` output when there is one. Student code can emit one (``sys.displayhook``)
  before a failing assertion and be scored by it; the course's tests never use partial credit, so
  test-cell results are turned into plain ``display_data`` before scoring.
* :class:`RobustExecute` (autograde): nbgrader's ``Execute`` fails the whole submission when the
  kernel dies or stays busy after a timeout interrupt. This keeps the cells that already ran and
  marks the rest as not run, so they score zero and the earlier ones keep their points. It also
  caps the output a cell keeps while it runs, so a cell that prints without end cannot fill the
  grader's memory (nbgrader's ``LimitOutput`` trims lines only after the run), and does not run
  the cells after the last test cell, which score nothing (the "plug it in" cell). It never runs
  a hidden cell in the kernel: where one stands, the kernel forks a snapshot of itself, and once
  every cell has run (nothing the kernel does can reach the student any more) the hidden tests
  run in that snapshot, with the private harness (:mod:`kvcourse_grader.hidden_harness`), or,
  for a cell that says so, in the grader itself, calling the student's code in the snapshot
  (:mod:`kvcourse_grader.remote`). Any later output that quotes a hidden test is still removed
  (:mod:`kvcourse_grader.leaks`). Before any student code runs it installs an audit hook in the
  kernel (:mod:`kvcourse_grader.audit`) that records what each cell's code did (imports, files,
  tracers, run-time compiles, processes, sockets, ctypes), and keeps that record in the
  notebook's metadata (``metadata.kvcourse.behaviour``) for the review.
"""

from __future__ import annotations

import ast
import secrets
import time
from queue import Empty
from typing import Any

import nbformat
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from kvcourse_grader import audit, hidden_runs, leaks, remote, snapshots
from kvcourse_grader.hidden_harness import with_private_harness

#: ``ename`` of the error output RobustExecute gives to cells it could not run.
NOT_RUN = "CellNotRun"


def _error_output(ename: str, evalue: str) -> NotebookNode:
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _content_size(content: dict) -> int:
    """Characters of text an output message carries (stream text, display data, traceback)."""
    size = len(str(content.get("text", ""))) + len(str(content.get("evalue", "")))
    size += sum(len(str(value)) for value in (content.get("data") or {}).values())
    return size + sum(len(str(line)) for line in content.get("traceback") or [])


class RedactHiddenTests(NbGraderPreprocessor):
    """Strip hidden-test regions from test cells and hide what those cells printed.

    A cell with a hidden region keeps its visible lines; its outputs become one line saying whether
    the hidden tests passed. Nothing from the original outputs survives: a traceback quotes the
    failing test line, and student code called by a hidden test could print its arguments.
    """

    begin_delimiter = Unicode("BEGIN HIDDEN TESTS").tag(config=True)
    end_delimiter = Unicode("END HIDDEN TESTS").tag(config=True)
    passed_text = Unicode("Hidden tests: passed.\n").tag(config=True)
    failed_text = Unicode(
        "Hidden tests: failed. Their code and output are not shown; the comment at the top of "
        "this cell says what they check.\n"
    ).tag(config=True)
    timeout_text = Unicode("Hidden tests: failed (the cell ran past the time limit).\n").tag(
        config=True
    )
    not_run_text = Unicode(
        "Hidden tests: not run (the kernel had stopped earlier in the notebook).\n"
    ).tag(config=True)

    def _strip(self, source: str) -> tuple[str, bool]:
        kept: list[str] = []
        inside = found = False
        for line in source.split("\n"):
            if self.begin_delimiter in line:
                inside = found = True
            elif self.end_delimiter in line:
                inside = False
            elif not inside:
                kept.append(line)
        return "\n".join(kept).rstrip("\n"), found

    property_text = Unicode("Hidden tests: failed: {}.\n").tag(config=True)

    def _note(self, outputs: list[Any], properties: set[str] = frozenset()) -> str:
        for output in outputs:
            if output.get("output_type") == "error":
                if output.get("ename") == NOT_RUN:
                    return self.not_run_text
                if output.get("ename") == "CellTimeoutError":
                    return self.timeout_text
                # Only a name the hidden cell itself declares: student code could raise an
                # error of that name carrying anything at all.
                if output.get("ename") == "PropertyFailed" and output.get("evalue") in properties:
                    return self.property_text.format(output["evalue"])
                return self.failed_text
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                return self.failed_text  # nbgrader scores stderr output as a failure
        return self.passed_text

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int):
        if cell.cell_type != "code":
            return cell, resources
        source, found = self._strip(cell.source)
        if found:
            note = self._note(cell.outputs, leaks.declared_properties(cell.source))
            cell.source = source
            cell.outputs = [new_output("stream", name="stdout", text=note)]
        return cell, resources


class DisablePartialCredit(NbGraderPreprocessor):
    """Turn ``execute_result`` outputs of test cells into ``display_data`` so they cannot score."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            outputs = []
            for output in cell.outputs:
                if output.get("output_type") == "execute_result":
                    output = new_output(
                        "display_data",
                        data=output.get("data", {}),
                        metadata=output.get("metadata", {}),
                    )
                outputs.append(output)
            cell.outputs = outputs
        return cell, resources


class _AuditedSnapshot(hidden_runs.Around):
    """The kernel's audit hook in a snapshot: told which hidden cell runs and to record again
    before it, asked for its record after it (what the student's code did while the hidden
    tests called it, for the review)."""

    def __init__(self, token: str, index: int, cell: NotebookNode) -> None:
        self.token, self.index, self.record = token, index, None
        self.grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")

    def enter(self, channel: remote.Channel) -> None:
        """Name the hidden cell and have the hook record again."""
        enter = audit.enter_code(self.token, self.index, "instructor", self.grade_id)
        channel.ask("audit", source=enter)
        channel.ask("audit", source=audit.resume_code(self.token))

    def leave(self, channel: remote.Channel) -> None:
        """Read the hook's record in the snapshot."""
        text = channel.ask(
            "audit", source=audit.read_code(self.token), stash=audit.stash_name(self.token)
        )
        self.record = audit.parse_read(text)


class RobustExecute(Execute):
    """nbgrader's ``Execute``, except that a lost kernel no longer fails the whole notebook.

    The kernel is lost when it dies (``os._exit``, a segfault), when it stays busy after a
    timed-out cell was interrupted (a loop that catches ``KeyboardInterrupt``: nbclient waits
    ``iopub_timeout`` seconds for it to go idle and raises, or, with ``raise_on_iopub_timeout``
    off, a kernel_info request goes unanswered for ``unresponsive_grace`` seconds), or when the
    notebook has run for ``notebook_budget`` seconds. The cell that was running gets an error; every
    later code cell gets a ``CellNotRun`` error without running, so test cells after the loss score
    zero and the cells before it keep their grades.

    Hidden cells run last, each in the snapshot of the kernel taken where it stands (module
    docstring). A kernel that stays busy is stopped only after they have run; one that died took
    its snapshots with it, so a new kernel runs the cells again, unseen, up to the last hidden cell
    before the loss, and the hidden cells run in its snapshots (:meth:`_replay`).
    """

    unresponsive_grace = Float(
        10.0,
        help="Seconds a kernel may take to answer after a timed-out cell is interrupted "
        "(at most the cell timeout).",
    ).tag(config=True)

    notebook_budget = Float(
        300.0,
        help="Seconds for the whole notebook, kernel start included; once they are spent the "
        "kernel is stopped and the remaining cells are marked not run. 0 turns the budget off.",
    ).tag(config=True)

    max_output_bytes = Integer(
        4 * 2**20,
        help="Characters of output one cell keeps while it runs; later output is dropped as it "
        "arrives, with one note. Errors are always kept (cut to this size); dropped stderr leaves "
        "a stderr note, so a test cell that wrote to stderr still fails. 0: no cap.",
    ).tag(config=True)

    case_seed = Unicode(
        "",
        help="The grading run's seed for the random cases of the hidden tests that run in the "
        "grader (kvcourse-grade autograde draws one per run and prints it); empty: the cases a "
        "solution notebook run by hand gets.",
    ).tag(config=True)

    run_after_last_test = Bool(
        False,
        help="Run the code cells after the last test cell too. They score nothing (the ungraded "
        "'plug it in' cell, and any cell a student added after it), so by default they are not "
        "run at autograde: their output says so, and the student runs them in their own notebook.",
    ).tag(config=True)

    #: The output a cell after the last test cell gets instead of running.
    not_run_after_tests = (
        "[grader: not run at grading; this cell scores nothing. Run it in your own notebook to "
        "see your code in the book's computation.]\n"
    )

    _lost: str | None = None
    _started_kernel: bool = False
    _last_test: int = -1
    _started: float = 0.0
    _kept: dict[int, int] = {}
    _noted: set[tuple[int, str]] = set()
    _token: str = ""
    _behaviour: dict | None = None
    _unread: int | None = None
    _pending: list = []
    _shared: dict = {}
    _listener: snapshots.SnapshotListener | None = None
    _serve_at: int = -1

    def output(self, outs, msg, display_id, cell_index):
        limit = self.max_output_bytes
        if not limit:
            return super().output(outs, msg, display_id, cell_index)
        kept = self._kept
        size = _content_size(msg.get("content", {}))
        is_error = msg.get("msg_type") == "error"
        if is_error or kept.get(cell_index, 0) + size <= limit:
            kept[cell_index] = kept.get(cell_index, 0) + size
            out = super().output(outs, msg, display_id, cell_index)
            if is_error and out is not None and size > limit:
                out["evalue"] = str(out.get("evalue", ""))[:limit]
                out["traceback"] = [str(line)[:limit] for line in out.get("traceback", [])[:100]]
            return out
        content = msg.get("content", {})
        stream = "stderr" if content.get("name") == "stderr" else "stdout"
        if (cell_index, stream) not in self._noted:
            self._noted.add((cell_index, stream))
            note = f"[grader: this cell's output passed {limit:,} characters; the rest was dropped]"
            outs.append(new_output("stream", name=stream, text=f"\n{note}\n"))
        return None

    def clear_output(self, outs, msg, cell_index):
        self._kept.pop(cell_index, None)  # a progress bar redraws in place
        return super().clear_output(outs, msg, cell_index)

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None):
        self._lost = None
        self._started = time.monotonic()
        self._kept, self._noted = {}, set()  # per cell: characters kept, streams cut
        self._started_kernel = False
        self._token, self._behaviour, self._unread = secrets.token_hex(12), None, None
        graded = [i for i, c in enumerate(nb.cells) if utils.is_grade(c) or utils.is_solution(c)]
        self._last_test = max(graded, default=len(nb.cells))
        code_cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        last_run = max(code_cells, default=-1) if self.run_after_last_test else self._last_test
        self._pending, self._shared, self._listener, self._serve_at = [], {}, None, last_run
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            self._serve_snapshots()  # none left unless the run stopped early
            if self._listener is not None:
                self._listener.close()
        nb.metadata.setdefault("kvcourse", {})["behaviour"] = audit.metadata(
            self._behaviour, self._unread
        )
        removed = leaks.redact_notebook(nb)
        for index, pieces in removed.items():
            shown = "; ".join(piece[:60] for piece in pieces[:5])
            self.log.warning(
                "Cell %d quoted hidden tests (%s); its output was removed", index, shown
            )
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int):
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        if index > self._last_test and not self.run_after_last_test:
            cell.outputs = [new_output("stream", name="stdout", text=self.not_run_after_tests)]
            return cell, resources
        spent = time.monotonic() - self._started
        if self._lost is None and self.notebook_budget and spent > self.notebook_budget:
            self._lost = f"the notebook used up its {self.notebook_budget:g} s before cell {index}"
            self.log.error("Execution budget spent before cell %d; stopping the kernel", index)
            self._serve_snapshots()
            run_sync(self._stop_kernel)()
        if self._lost is not None:
            cell.outputs = [_error_output(NOT_RUN, f"not run: {self._lost}")]
            return cell, resources
        written = cell.source
        hidden = (
            utils.is_grade(cell) and not utils.is_solution(cell) and leaks.is_hidden_cell(written)
        )
        try:
            if not self._started_kernel:  # before any code of the student's has run
                run_sync(self._quietly)(audit.install_code(self._token))
                self._started_kernel = True
            if hidden:  # a snapshot of the kernel now; the tests once every cell has run
                self._take_snapshot(cell, index, written)
                if index >= self._serve_at:
                    self._serve_snapshots()
                return cell, self.resources
            # nbgrader put the instructor's copy of a locked or test cell back (it drops the
            # grade_id of a cell the gradebook does not know): its own frames are not recorded
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            theirs = utils.is_locked(cell) or (utils.is_grade(cell) and not utils.is_solution(cell))
            kind = "instructor" if grade_id and theirs else "student"
            run_sync(self._quietly)(audit.enter_code(self._token, index, kind, grade_id))
            self._check_assign_resources(resources)
            cell = self.execute_cell(cell, index, store_history=True)
            resources = self.resources
        except DeadKernelError:
            self._replay(self._serve_snapshots())
            self._lost = f"the kernel died while running cell {index}"
            self.log.error("Kernel died in cell %d; the remaining cells are marked not run", index)
            cell.outputs.append(_error_output("DeadKernelError", "the kernel died in this cell"))
            return cell, self.resources
        except CellTimeoutError:
            # nbclient interrupted the cell, but the kernel never went idle (iopub_timeout).
            self._lost = f"the kernel stayed busy after cell {index} timed out and was stopped"
            self.log.error("Kernel unresponsive after cell %d timed out; stopping it", index)
            cell.outputs.append(
                _error_output("CellTimeoutError", "the cell ran past the time limit")
            )
            self._serve_snapshots()
            run_sync(self._stop_kernel)()
            return cell, self.resources
        finally:
            cell.source = written
        timed_out = any(o.get("ename") == "CellTimeoutError" for o in cell.outputs)
        grace = min(self.unresponsive_grace, self.timeout or self.unresponsive_grace)
        if timed_out and not run_sync(self._kernel_answers)(grace):
            self._lost = f"the kernel stayed busy after cell {index} timed out and was stopped"
            self.log.error("Kernel unresponsive after cell %d timed out; stopping it", index)
            self._serve_snapshots()
            run_sync(self._stop_kernel)()
        else:
            try:
                self._read_behaviour(index)
            except (DeadKernelError, CellTimeoutError):
                self._lost = f"the kernel was lost after cell {index}"
        if index >= self._serve_at:
            self._serve_snapshots()
        return cell, resources

    def _take_snapshot(self, cell: NotebookNode, index: int, written: str) -> None:
        """Where a hidden cell stands: the kernel forks a snapshot of itself, which waits on the
        grader's socket until :meth:`_serve_snapshots` (:mod:`kvcourse_grader.remote`)."""
        if self._listener is None:
            folder = (self.resources or {}).get("metadata", {}).get("path") or "."
            self._listener = snapshots.SnapshotListener(folder)
        self._listener.drain()
        nonce = secrets.token_hex(16)
        cpu = int(self.timeout or 600) + 5
        wall = int(self.notebook_budget or 3600) + 60 * int(self.timeout or 600)
        run_sync(self._quietly)(
            snapshots.snapshot_code(self._listener.kernel_path, nonce, cpu, wall)
        )
        conn = self._listener.accept(nonce, wait=15)
        if conn is None:
            self.log.warning("Cell %d: the kernel's snapshot never called in", index)
        self._pending.append((index, cell, written, conn))
        cell.outputs = []

    def _serve_snapshots(self) -> list:
        """Run the hidden cells waiting for their snapshots, in order, now that no student code
        whose output the student gets back runs any more: in the snapshot, or in the grader for a
        cell that says so. The ones whose snapshot was lost (it died with its kernel) come back
        for :meth:`_replay`."""
        pending, self._pending, lost = self._pending, [], []
        for entry in pending:
            index, cell, written, conn = entry
            started = time.monotonic()
            if self._budget_spent():  # hidden cells count against the notebook's time too
                reason = f"the notebook used up its {self.notebook_budget:g} s before cell {index}"
                cell.outputs = [_error_output(NOT_RUN, f"not run: {reason}")]
                if conn is not None:
                    conn.close()
                continue
            deadline = started + (self.timeout or 600)
            if self.notebook_budget:
                deadline = min(deadline, self._started + self.notebook_budget)
            channel = remote.Channel(conn, deadline) if conn is not None else None
            in_grader = hidden_runs.runs_in_grader(written)
            around = _AuditedSnapshot(self._token, index, cell)
            if in_grader:
                outputs = hidden_runs.run_hidden_cell(
                    written, channel, self._shared, index, NOT_RUN, around, self.case_seed
                )
            else:
                private = with_private_harness(written)
                outputs = hidden_runs.run_in_snapshot(private, channel, index, NOT_RUN, around)
            cell.outputs = [nbformat.from_dict(output) for output in outputs]
            self._behaviour = audit.merged(self._behaviour, around.record)
            if channel is not None:
                where = "the grader" if in_grader else "its snapshot"
                spent = time.monotonic() - started
                self.log.info(
                    "Hidden cell %d ran in %s: %d calls in %.2f s",
                    index,
                    where,
                    channel.requests,
                    spent,
                )
            if channel is not None and channel.lost:
                lost.append(entry)
        return lost

    def _replay(self, lost: list) -> None:
        """The kernel died and took the snapshots of ``lost`` with it (in the sandbox every
        process of the kernel ends with it): start a new kernel, run the notebook's cells again
        up to the last of them, outputs unseen, taking the snapshots again where they stand, and
        run those hidden cells. Nothing of this run reaches the student."""
        if not lost or self.km is None or self.kc is None:
            return
        wanted = {entry[0]: entry for entry in lost}
        try:
            run_sync(self.km.restart_kernel)(now=True)
            run_sync(ensure_async)(self.kc.wait_for_ready(timeout=self.startup_timeout))
            for index, cell in enumerate(self.nb.cells[: max(wanted) + 1]):
                if cell.cell_type != "code" or not cell.source.strip():
                    continue
                if self._budget_spent():
                    break
                if index in wanted:
                    self._take_snapshot(cell, index, wanted[index][2])
                elif not (utils.is_grade(cell) and leaks.is_hidden_cell(cell.source)):
                    run_sync(self._quietly)(cell.source)
        except Exception:  # the new kernel failed too: the cells left stay not run
            self.log.warning("The replay for the lost snapshots stopped", exc_info=True)
        self._serve_snapshots()
        run_sync(self._stop_kernel)()

    def _budget_spent(self) -> bool:
        """Whether the notebook has used up its ``notebook_budget`` seconds."""
        spent = time.monotonic() - self._started
        return bool(self.notebook_budget) and spent > self.notebook_budget

    def _read_behaviour(self, index: int) -> None:
        """Ask the kernel's audit hook for its record after cell ``index``; a record that cannot
        be read (the student broke the channel) is remembered and reported."""
        text = run_sync(self._quietly)(
            audit.read_code(self._token), audit.read_expression(self._token)
        )
        record = audit.parse_read(text)
        if record is None:
            if self._unread is None:
                self._unread = index
                self.log.warning("The behaviour record could not be read after cell %d", index)
            return
        self._behaviour, self._unread = record, None

    async def _quietly(self, code: str, expression: str = "") -> str:
        """Run ``code`` silently and unrecorded (no output, no history, no event callbacks);
        the plain-text value of ``expression`` ("" when there is none, or "{}" for a failure)."""
        assert self.kc is not None
        if self._token and not code.startswith(audit.marker(self._token)):
            # the audit hook leaves the grader's own code unrecorded
            code = f"{audit.marker(self._token)}\n{code or 'pass'}"
        expressions = {"value": expression} if expression else {}
        msg_id = self.kc.execute(
            code, silent=True, store_history=False, user_expressions=expressions, allow_stdin=False
        )
        reply = await self.async_wait_for_reply(msg_id)
        value = ((reply or {}).get("content", {}).get("user_expressions") or {}).get("value", {})
        if expression and value.get("status") != "ok":
            return "{}"
        if not expression:
            return ""
        try:  # the value is a string, shown as its repr
            return str(ast.literal_eval(value.get("data", {}).get("text/plain", "")))
        except (ValueError, SyntaxError):
            return "{}"

    async def _kernel_answers(self, wait: float) -> bool:
        """Ask for kernel_info; True if the reply comes within ``wait`` seconds."""
        assert self.kc is not None
        msg_id = self.kc.kernel_info()
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=left))
            except Empty:
                return False
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return True
        return False

    async def _stop_kernel(self) -> None:
        assert self.km is not None
        try:
            await ensure_async(self.km.shutdown_kernel(now=True))
        except Exception:  # already gone, or the manager refuses: the kernel is lost either way
            self.log.warning("Could not shut the unresponsive kernel down cleanly", exc_info=True)
