"""Grading support for the course's nbgrader assignments.

* :mod:`kvcourse.grading.preprocessors`: nbgrader preprocessors that close gaps in nbgrader 0.9
  (hidden tests shown in feedback, forged partial credit, a dead kernel failing a whole
  submission); ``grading/nbgrader_config.py`` installs them.
* :mod:`kvcourse.grading.runner`: runs nbgrader as subprocesses with time and memory limits.
* :mod:`kvcourse.grading.samples`: builds sample submissions from the current student version.
* :mod:`kvcourse.grading.review`: flags submission code an instructor should look at.

The command line is :mod:`kvcourse.grading.cli` (``kvcourse-grade``).
"""
