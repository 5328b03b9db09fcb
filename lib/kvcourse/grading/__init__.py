"""Grading support for the course's nbgrader assignments.

* :mod:`kvcourse.grading.checks`: helpers for the assignments' visible test cells (the library's
  reference switched off, fresh copies of library modules, plain values and clear messages);
* :mod:`kvcourse.grading.serving_checks` and :mod:`kvcourse.grading.conductor_checks`: the same
  for a4's schedulers and a6's Conductor decisions;
* :mod:`kvcourse.grading.preprocessors`: nbgrader preprocessors that close gaps in nbgrader 0.9
  (hidden tests shown in feedback, forged partial credit, a dead kernel failing a whole
  submission); ``grading/nbgrader_config.py`` installs them.
* :mod:`kvcourse.grading.runner`: runs nbgrader as subprocesses with time and memory limits;
  :mod:`kvcourse.grading.gradebook_lock` makes parallel graders take turns on a SQLite gradebook.
* :mod:`kvcourse.grading.autograde`: grades many students at once, with
  :mod:`kvcourse.grading.jobs` (one student's submission) and :mod:`kvcourse.grading.fanout`
  (this machine's cores, or a Dask cluster).
* :mod:`kvcourse.grading.bundle`: the students' zip or folder (released notebooks, the library,
  lab settings), checked for solutions and hidden tests.
* :mod:`kvcourse.grading.sandbox`: starts each student kernel in a bubblewrap sandbox (no course
  sources, gradebook or network).
* :mod:`kvcourse.grading.course`: the course's folders, assignments, students and gradebook.
* :mod:`kvcourse.grading.collect`: takes submissions in from notebooks, zips and folders.
* :mod:`kvcourse.grading.samples`: builds sample submissions from the current student version,
  and holds the code that the sample descriptions share.
* :mod:`kvcourse.grading.review`: flags submission code an instructor should look at.

The command line is :mod:`kvcourse.grading.cli` (``kvcourse-grade``).
"""
