# One command per job. Every target creates the virtual environment first if it is missing or
# older than pyproject.toml, so `make book` and `make test` work on a fresh clone.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of PyTorch; pip takes it from a local wheel where one is provided. Override on a GPU
# machine, e.g. `make TORCH_SPEC="torch==2.11.0" CONSTRAINTS= test`.
TORCH_SPEC ?= torch==2.13.0
ASSIGNMENTS ?=
# The assignment a collected folder holds (needed once there is more than one assignment).
ASSIGNMENT ?=
# Students autograded at once (empty: the CPU count); where `make bundle` writes (empty: the default).
WORKERS ?=
OUT ?=

.PHONY: help venv lock system-packages book translations test test-e2e test-fast lint format lab release bundle collect autograde feedback export clean

help:
	@echo "make book            build the book into _build/html, its Chinese edition into _build/html/zh"
	@echo "                     (creates .venv on first use)"
	@echo "make translations    after editing an English page: update the Chinese catalogs under locale/"
	@echo "make test            lint, check formatting, every test but the end-to-end ones (library,"
	@echo "                     book in both editions, grader, Triton interpreter): before a commit"
	@echo "make test-e2e        end to end: every sample student graded by nbgrader, the browser over"
	@echo "                     every page, JupyterLab, PostgreSQL and Dask (CI runs both)"
	@echo "make test-fast       lint, doctests and the tests not marked slow (no book build, nbgrader,"
	@echo "                     Triton interpreter or browser)"
	@echo "make system-packages as root: Debian's bubblewrap (grading sandbox), PostgreSQL (gradebook-"
	@echo "                     server tests), Chromium and CJK fonts (browser tests); CI does"
	@echo "make lock            recompile requirements/constraints.txt after a dependency changed"
	@echo "make lab             open the student notebooks in JupyterLab"
	@echo "make release         regenerate notebooks/ from solutions/ (instructors)"
	@echo "make bundle          write the students' download (released notebooks + library) [OUT=path]"
	@echo "make collect INBOX=dir ASSIGNMENT=a  copy notebooks or zips into grading/submitted/"
	@echo "make autograde       autograde every submission under grading/submitted/ [WORKERS=n]"
	@echo "make feedback        write feedback (hidden tests removed) under grading/feedback/"
	@echo "make export          export grades to grading/grades.csv"
	@echo "make format          apply ruff's formatting and safe fixes"

# Every version but PyTorch's comes from requirements/constraints.txt (`make lock` writes it), so a
# fresh clone installs what CI tested: the library with its book and dev extras, and the grader.
# With another PyTorch (TORCH_SPEC), whose Triton may differ, `make CONSTRAINTS= ...` lets pip choose.
CONSTRAINTS ?= requirements/constraints.txt

# pip installs PyTorch (it finds a local CPU wheel where one is provided) and uv; uv installs the
# rest, the same packages as pip would, several times faster.
$(VENV)/.installed: pyproject.toml grading/pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) \
		-e ".[book,dev]" -e ./grading
	touch $@

venv: $(VENV)/.installed

# Resolve requirements/course.in (the library's extras and the grader) for this machine's Python
# on Linux x86-64, PyTorch pinned by TORCH_SPEC and left out, with uv (a dev dependency).
lock: venv
	echo "$(TORCH_SPEC)" > $(VENV)/torch-spec.txt
	$(BIN)/uv pip compile requirements/course.in --constraint $(VENV)/torch-spec.txt \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-emit-package torch \
		--no-emit-package kvcourse --no-emit-package kvcourse-grader --annotation-style line \
		$(if $(wildcard /opt/wheels),--find-links /opt/wheels) --custom-compile-command "make lock" \
		--output-file requirements/constraints.txt

# The system packages the tests use, from Debian, in one apt-get run (as root): bubblewrap for the
# grading sandbox, PostgreSQL for the gradebook-server tests, Chromium and CJK fonts for the
# browser tests (Playwright drives Debian's Chromium; its own browser download is never used).
# Without one, its tests are skipped (or, for bubblewrap, run unsandboxed) and say how to get it.
system-packages:
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	dpkg -s fonts-noto-cjk >/dev/null 2>&1 || missing="$$missing fonts-noto-cjk"; \
	if [ -z "$$missing" ]; then \
		echo "present: $$(bwrap --version), PostgreSQL $$(ls /usr/lib/postgresql/ | tr '\n' ' ')," \
			"$$(/usr/bin/chromium --version 2>/dev/null), fonts-noto-cjk"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing \
			>/dev/null && echo "installed:$$missing"; \
	else \
		echo "missing:$$missing; run 'sudo apt-get install$$missing' (the tests that need them" \
			"are skipped without them; the grading tests run unsandboxed without bubblewrap)" >&2; \
	fi

# Pages execute into one cache, _build/.jupyter_cache, shared with the tests' builds; a page is
# executed and read again exactly when something it reads changes (book/_ext/page_inputs.py).
book: venv
	$(BIN)/python book/editions.py build

# After editing an English page: extract its messages and merge them into the Chinese catalogs
# (locale/zh_CN/LC_MESSAGES/<page>.po); new entries are empty and changed ones fuzzy until
# translated, and `make book` fails until they are.
translations: venv
	$(BIN)/python book/editions.py catalogs

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Two pytest workers share the two cores: while one builds the book or drives a browser (one core
# each), the other grades an assignment's samples (tests/conftest.py keeps each expensive fixture
# on one worker), the heaviest groups first (tests/conftest.py: SECONDS). TEST_JOBS=0 runs
# everything in one process.
TEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest $(if $(filter-out 0,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadgroup --no-loadscope-reorder)

# Every check of the library, the pages (both editions built with warnings as errors) and the
# grader, except the end-to-end runs at a class's scale (test-e2e): the check before a commit.
test: lint
	$(PYTEST) -m "not e2e" --durations=15

# End to end through the real programs: every sample student of every assignment graded by
# nbgrader (the solution full marks, the release zero, each one-mistake solution losing its part),
# Chromium over every page of both editions, each assignment in JupyterLab, PostgreSQL and Dask.
# CI runs it after `make test`.
test-e2e: venv
	$(PYTEST) -m e2e --durations=15

# The inner loop: lint, doctests and every test not marked slow (the slow ones: the book build,
# nbgrader runs, the Triton interpreter, the browser, and the long simulations and decodings).
test-fast: lint
	$(PYTEST) -m "not slow"

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Students' JupyterLab: grading/student_lab/ hides nbgrader's instructor tools and the news prompt.
# Jupyter refuses to run as root (containers, some JupyterHubs) unless it is told to.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)
lab: venv
	JUPYTER_CONFIG_PATH="$(CURDIR)/grading/student_lab" $(BIN)/jupyter lab $(LAB_FLAGS) notebooks/

release: venv
	$(BIN)/kvcourse-grade release $(ASSIGNMENTS)

bundle: venv
	$(BIN)/kvcourse-grade bundle $(if $(OUT),--out "$(OUT)")

collect: venv
	@test -n "$(INBOX)" || (echo "usage: make collect INBOX=folder ASSIGNMENT=a0_kv_sizing" >&2; exit 2)
	$(BIN)/kvcourse-grade collect "$(INBOX)" $(if $(ASSIGNMENT),--assignment $(ASSIGNMENT))

autograde: venv
	$(BIN)/kvcourse-grade autograde $(ASSIGNMENTS) $(if $(WORKERS),--workers $(WORKERS))

feedback: venv
	$(BIN)/kvcourse-grade feedback $(ASSIGNMENTS)

export: venv
	$(BIN)/kvcourse-grade export

clean:
	rm -rf _build .pytest_cache .ruff_cache
