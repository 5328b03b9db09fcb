"""Sample students who try to read the hidden tests and print them into their own feedback.

Each is a correct submission (full marks) with one way of reading what the hidden cells ran, so
the tests can prove, end to end, that nothing of a hidden cell comes back (see
:mod:`kvcourse_grader.leaks`) and that the submission is flagged for review. An assignment's
sample description builds them with :func:`leak_samples`, naming its first and last solution
cells and one function the hidden tests call.

* ``leaks_history``: a cell added at the end prints IPython's input history, ``linecache``
  and the history database: the cell is not run at autograde, and the history never held a
  hidden cell anyway.
* ``leaks_hooks``: the first solution cell registers event callbacks and an input transformer
  that see every later cell's source; the last solution cell prints what they saw. They are
  taken off before each hidden cell.
* ``leaks_callers``: a function the hidden tests call stashes the constants of the frames
  above it (the hidden cell's expected values among them); the last solution cell
  prints the stash base64-encoded. Nothing in the kernel can stop this one where the hidden
  tests run in the kernel: the output is removed and the submission flagged. Where they run in
  the grader (:mod:`kvcourse_grader.remote`) the frames above it are the snapshot server's, and
  the stash holds nothing of the tests.
* ``leaks_tracer``: the first solution cell installs a trace function (``sys.settrace`` and
  ``threading.settrace``) that records the constants and local variables of every function
  called from then on; the last solution cell prints the record XOR-scrambled into hex, which no
  output search recognises. Only hidden tests that run in the grader resist it:
  :func:`read_traced` unscrambles the record for the tests that prove nothing of them is in it.
"""

from __future__ import annotations

from kvcourse_grader.samples import Sample

__all__ = ["READ_HISTORY", "leak_samples", "read_traced"]

#: Prints what IPython and Python keep of earlier cells' source.
READ_HISTORY = """
import linecache
import sqlite3

shell = get_ipython()
print("In:", In)
print("_ih:", _ih)
print("raw history:", shell.history_manager.input_hist_raw)
for name, entry in list(linecache.cache.items()):
    print(name, "".join(entry[2]))
try:
    db = sqlite3.connect(str(shell.history_manager.hist_file))
    print("history database:", db.execute("select source_raw from history").fetchall())
except Exception as err:
    print("no history database:", err)
"""

#: Hooks every later cell's source: event callbacks and an input transformer.
HOOK_CELLS = """
SEEN_CELLS = []
shell = get_ipython()
shell.events.register("pre_run_cell", lambda info: SEEN_CELLS.append(info.raw_cell))
shell.events.register("post_run_cell", lambda result: print(result.info.raw_cell))
shell.input_transformers_cleanup.append(lambda lines: SEEN_CELLS.append("".join(lines)) or lines)

"""

#: Prints what the hooks saw.
PRINT_SEEN = """
print("cells seen:", "\\n".join(SEEN_CELLS))

"""

#: Wraps ``{name}`` so that each call stashes the constants of the frames that called it.
STASH_CALLERS = """

import sys as _sys

_real_{name} = {name}
STASH = []


def {name}(*args, **kwargs):
    frame = _sys._getframe(1)
    for _ in range(3):  # the test's own frame and the two above it
        if frame is None:
            break
        STASH.append(repr(frame.f_code.co_consts))
        frame = frame.f_back
    return _real_{name}(*args, **kwargs)
"""

#: Prints the stash, base64-encoded so that the hidden values do not show as they are.
PRINT_STASH = """
import base64

print("stash: " + base64.b64encode("\\n".join(STASH).encode()).decode())

"""


#: Records every function called from now on: its code's constants and its local variables.
TRACE_ALL = """

import sys as _sys
import threading as _threading

TRACED = []


def _trace_everything(frame, event, arg):
    # Cells (ipykernel names them /tmp/ipykernel_<pid>/<hash>.py) and code compiled from text:
    # where a hidden test would be.
    name = frame.f_code.co_filename
    # At most 1,500 records of 600 characters: printed in hex, under the grader's 4 MiB a cell.
    if event == "call" and ("ipykernel_" in name or name.startswith("<h")) and len(TRACED) < 1500:
        for value in (frame.f_code.co_consts, frame.f_locals):
            try:
                TRACED.append(repr(value)[:600])
            except Exception:  # a value whose repr fails
                pass
    return None


_sys.settrace(_trace_everything)
_threading.settrace(_trace_everything)
"""

#: The mark before the scrambled record in the last cell's output.
TRACED_MARK = "traced:"

#: Prints the record, each byte XOR 0x5A, in hex.
PRINT_TRACED = """
print("traced: " + bytes(b ^ 0x5A for b in "\\n".join(TRACED).encode()).hex())

"""


def read_traced(text: str) -> str:
    """What ``leaks_tracer`` recorded, from the text of its printed output ("" if none)."""
    for line in text.splitlines():
        if line.startswith(TRACED_MARK):
            scrambled = bytes.fromhex(line[len(TRACED_MARK) :].strip())
            return bytes(b ^ 0x5A for b in scrambled).decode("utf-8", "replace")
    return ""


def leak_samples(first_cell: str, last_cell: str, called: str) -> dict[str, Sample]:
    """The three samples of the module docstring for an assignment whose first and last solution
    cells are ``first_cell`` and ``last_cell`` (grade ids) and whose hidden tests call the
    function ``called`` (defined in ``first_cell``)."""
    return {
        "leaks_history": Sample(
            about="correct, plus a last cell that prints the input history and linecache",
            appended=(READ_HISTORY,),
        ),
        "leaks_hooks": Sample(
            about="correct, with IPython hooks that record every later cell's source",
            cells={
                first_cell: lambda solution: HOOK_CELLS + solution,
                last_cell: lambda solution: PRINT_SEEN + solution,
            },
        ),
        "leaks_callers": Sample(
            about="correct, but the hidden tests' frames are stashed and printed base64-encoded",
            cells={
                first_cell: lambda solution: solution + STASH_CALLERS.format(name=called),
                last_cell: lambda solution: PRINT_STASH + solution,
            },
        ),
        "leaks_tracer": Sample(
            about="correct, but a trace function records every call's constants and locals, "
            "printed scrambled",
            cells={
                first_cell: lambda solution: TRACE_ALL + solution,
                last_cell: lambda solution: PRINT_TRACED + solution,
            },
        ),
    }
