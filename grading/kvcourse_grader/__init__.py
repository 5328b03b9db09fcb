"""kvcourse_grader: the instructor's grader for the course's nbgrader assignments.

A package of its own, installed by the instructor's set-up (``pip install -e grading``) and never
put into the students' bundle; it imports the course library (``kvcourse``), never the other way
round. The test cells' helpers stay in the library (:mod:`kvcourse.assignment_checks`), since a
student's visible tests need them.

* :mod:`kvcourse_grader.cli`: the command line, ``kvcourse-grade``, one command per step;
* :mod:`kvcourse_grader.course`: the course's folders, assignments, students and gradebook;
* :mod:`kvcourse_grader.bundle`: the students' zip or folder (released notebooks, the library,
  lab settings), checked for solutions and hidden tests;
* :mod:`kvcourse_grader.collect`, :mod:`kvcourse_grader.lms_in`: submissions in from notebooks,
  zips, folders, a Canvas or Moodle download, or nbgrader's exchange;
* :mod:`kvcourse_grader.autograde`: every submission graded, many students at once, with
  :mod:`kvcourse_grader.jobs` (one student's submission), :mod:`kvcourse_grader.fanout` (this
  machine's cores, or a Dask cluster), :mod:`kvcourse_grader.runner` (nbgrader as a subprocess
  with time and memory limits) and :mod:`kvcourse_grader.gradebook_lock` (parallel graders take
  turns on a SQLite gradebook);
* :mod:`kvcourse_grader.sandbox`: every student kernel in a bubblewrap sandbox;
* :mod:`kvcourse_grader.preprocessors`: nbgrader preprocessors that close gaps in nbgrader 0.9
  (hidden tests in feedback, forged partial credit, a dead kernel failing a whole submission) and
  run hidden cells last, out of the kernel; ``grading/nbgrader_config.py`` installs them;
* :mod:`kvcourse_grader.snapshots`, :mod:`kvcourse_grader.snapshot_server`: a snapshot of the
  student's kernel forked where a hidden cell stands, and the server it runs;
  :mod:`kvcourse_grader.hidden_runs`: a hidden cell run in its snapshot, or in the grader with
  :mod:`kvcourse_grader.remote` (the student's code across the socket);
  :mod:`kvcourse_grader.hidden_harness`: the private harness the hidden cells use;
* :mod:`kvcourse_grader.review`: flags submission code an instructor should look at, with
  :mod:`kvcourse_grader.audit` (what the code did while graded, from an audit hook in the
  kernel) and :mod:`kvcourse_grader.leaks` (hidden tests' text kept out of the feedback);
* :mod:`kvcourse_grader.similarity`: each submission's code compared with the library's
  reference and with the other students' (copydetect), for a person to read;
* :mod:`kvcourse_grader.lms_out`: grades out as the CSV Canvas or Moodle imports;
* :mod:`kvcourse_grader.samples`: sample submissions built from the current release, and the code
  the sample descriptions of ``grading/samples/`` share.
"""
