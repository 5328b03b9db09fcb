"""nbgrader configuration for the course (nbgrader 0.9).

nbgrader reads ``nbgrader_config.py`` from the directory it runs in, so run it from ``grading/``
(``kvcourse-grade`` does). Every path below is derived from this file's own location, so a copy of
the repository anywhere (a temporary directory in the tests, a fresh clone) grades itself.

Layout (relative to the repository root):

* ``solutions/<assignment>/<assignment>.ipynb``  source notebooks with solutions and hidden tests
* ``notebooks/<assignment>/<assignment>.ipynb``  student versions written by ``generate_assignment``
* ``grading/submitted/<student>/<assignment>/``   collected submissions
* ``grading/autograded/…``, ``grading/feedback/…`` nbgrader's outputs
* ``grading/gradebook.db``                        the gradebook (SQLite)
"""

from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearMarkScheme,
    ClearOutput,
    ComputeChecksums,
    GetGrades,
    IgnorePattern,
    IncludeHeaderFooter,
    InstantiateTests,
    LimitOutput,
    LockCells,
    SaveAutoGrades,
    SaveCells,
)

from kvcourse_grader.feedback_page import (
    TEMPLATE_FILE,
    TEMPLATE_NAME,
    FailureFirst,
    MathToMathML,
    template_dirs,
)
from kvcourse_grader.preprocessors import DisablePartialCredit, RedactHiddenTests, RobustExecute
from kvcourse_grader.stubs import NamedStubs

c = get_config()  # noqa: F821 -- injected by traitlets when it executes this file

GRADING = Path(__file__).resolve().parent
ROOT = GRADING.parent

# --- where things live -----------------------------------------------------------------------
c.CourseDirectory.root = str(ROOT)
c.CourseDirectory.course_id = "kvcourse"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "grading/submitted"
c.CourseDirectory.autograded_directory = "grading/autograded"
c.CourseDirectory.feedback_directory = "grading/feedback"
c.CourseDirectory.db_url = f"sqlite:///{GRADING / 'gradebook.db'}"

# --- release ---------------------------------------------------------------------------------
# nbgrader's own list, with ClearSolutions replaced by NamedStubs: the stub a student finds in a
# method says which method it is ("write MyBlockTable.append here").
c.GenerateAssignment.preprocessors = [
    IncludeHeaderFooter,
    InstantiateTests,
    LockCells,
    NamedStubs,
    ClearOutput,
    CheckCellMetadata,
    ComputeChecksums,
    SaveCells,
    ClearHiddenTests,
    ClearMarkScheme,
    ComputeChecksums,
    CheckCellMetadata,
]

# --- autograding -----------------------------------------------------------------------------
# One cell may run for this long before nbgrader interrupts it. Every solution notebook runs in
# well under 60 s in total (CONTRIBUTING.md, "Budgets"), so no correct cell comes near it.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
# RobustExecute is nbgrader's Execute plus one thing: when the kernel dies (os._exit, a crash),
# stays busy after a timeout interrupt, or the notebook has run for 300 s in all, the kernel is
# stopped and the remaining cells are marked as not run instead of the whole submission failing,
# so the cells that did pass keep their points.
c.RobustExecute.unresponsive_grace = 10
c.RobustExecute.notebook_budget = 300
# nbgrader's own list, with Execute replaced and partial credit switched off (see below).
c.Autograde.autograde_preprocessors = [
    RobustExecute,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    # nbgrader reads a test cell's first execute_result as a partial score. The course's tests
    # never produce one, but student code can (sys.displayhook) and would then be scored by it;
    # this turns execute_result outputs of test cells into display_data before scoring.
    DisablePartialCredit,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]

# --- feedback --------------------------------------------------------------------------------
# nbgrader copies the autograded notebook, hidden tests and their tracebacks included, into the
# feedback. RedactHiddenTests removes the hidden-test regions from the source and replaces the
# outputs of those cells with a one-line pass/fail note. FailureFirst then puts what each test cell
# that lost points said first: under its part in the table, and above the cell's code.
c.GenerateFeedback.preprocessors = [
    GetGrades,
    RedactHiddenTests,
    FailureFirst,
    MathToMathML,
    CSSHTMLHeaderPreprocessor,
]
# The course's feedback page (kvcourse_grader.feedback_page): named links, phone-sized, offline.
c.HTMLExporter.template_name = TEMPLATE_NAME
c.HTMLExporter.template_file = TEMPLATE_FILE
c.HTMLExporter.extra_template_basedirs = template_dirs()
