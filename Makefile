# One command per job. Every target creates the virtual environment first if it is missing or
# older than pyproject.toml, so `make book` and `make test` work on a fresh clone.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of PyTorch; pip takes it from a local wheel where one is provided. Override on a GPU
# machine, e.g. `make TORCH_SPEC="torch==2.11.0" test`, or with an already installed torch.
TORCH_SPEC ?= torch==2.13.0
ASSIGNMENTS ?=
# The assignment a collected folder holds (needed once there is more than one assignment).
ASSIGNMENT ?=
# Students autograded at once (empty: the CPU count); where `make bundle` writes (empty: the default).
WORKERS ?=
OUT ?=

.PHONY: help venv browser book test test-fast lint format lab release bundle collect autograde feedback export clean

help:
	@echo "make book       build the book into _build/html (creates .venv on first use)"
	@echo "make test       lint, check formatting, run every test (library, assignments, book build)"
	@echo "make test-fast  lint and the fast tests only (no book build, nbgrader or Triton interpreter)"
	@echo "make browser    install Debian's chromium (browser tests), bubblewrap (grading sandbox) and"
	@echo "                PostgreSQL (gradebook-server tests), as root; CI does"
	@echo "make lab        open the student notebooks in JupyterLab"
	@echo "make release    regenerate notebooks/ from solutions/ (instructors)"
	@echo "make bundle     write the students' download (released notebooks + library) [OUT=path]"
	@echo "make collect INBOX=dir ASSIGNMENT=a  copy notebooks or zips into grading/submitted/"
	@echo "make autograde  autograde every submission under grading/submitted/ [WORKERS=n]"
	@echo "make feedback   write feedback (hidden tests removed) under grading/feedback/"
	@echo "make export     export grades to grading/grades.csv"
	@echo "make format     apply ruff's formatting and safe fixes"

$(VENV)/.installed: pyproject.toml grading/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[book,dev]" -e ./grading
	touch $@

venv: $(VENV)/.installed

# The system packages the tests use, from Debian (as root): bubblewrap for the grading sandbox,
# PostgreSQL for the parallel-grading tests, and Chromium, which the browser tests (tests/browser)
# drive with Playwright (its own browser download is never used). Without one, its tests are
# skipped (or, for bubblewrap, run unsandboxed) and say how to get it.
browser:
	@if command -v bwrap >/dev/null 2>&1; then echo "grading sandbox: $$(bwrap --version)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap \
			>/dev/null && echo "installed $$(bwrap --version)"; \
	else \
		echo "bubblewrap is missing: run 'sudo apt-get install bubblewrap' to grade in a sandbox" \
			"(the grading tests then run unsandboxed and leave out the sandbox samples)" >&2; \
	fi
	@if command -v pg_ctlcluster >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "PostgreSQL for the parallel-grading tests: $$(ls -d /usr/lib/postgresql/*/ 2>/dev/null | tr '\n' ' ')"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql \
			>/dev/null && echo "installed PostgreSQL $$(ls /usr/lib/postgresql/)"; \
	else \
		echo "PostgreSQL is missing: run 'sudo apt-get install postgresql' for the gradebook-server" \
			"tests (they are skipped without it)" >&2; \
	fi
	@if [ -x /usr/bin/chromium ]; then echo "browser tests: $$(/usr/bin/chromium --version 2>/dev/null)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium fonts-noto-cjk >/dev/null && echo "installed $$(/usr/bin/chromium --version 2>/dev/null)"; \
	else \
		echo "chromium is missing: run 'sudo apt-get install chromium fonts-noto-cjk' for the" \
			"browser tests (they are skipped without it)" >&2; \
	fi

# The execution cache keys pages on their own source only, so a change in the library (or a new
# benchmark result that §4 shows) would leave stale outputs: drop the cache when those change.
INPUTS_HASH = $(shell find lib bench/results -type f \( -name '*.py' -o -name '*.txt' \) -not -path '*egg-info*' | sort \
	| xargs cat | sha256sum | cut -c1-16)

book: venv
	@mkdir -p _build
	@if [ "$$(cat _build/.inputs-hash 2>/dev/null)" != "$(INPUTS_HASH)" ]; then \
		rm -rf _build/.jupyter_cache && echo "library changed: pages will re-execute"; fi
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo "$(INPUTS_HASH)" > _build/.inputs-hash

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

# The inner loop: everything but the tests marked slow (book build, nbgrader runs, the interpreter).
test-fast: lint
	$(BIN)/python -m pytest -m "not slow"

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Students' JupyterLab: grading/student_lab/ hides nbgrader's instructor tools and the news prompt.
lab: venv
	JUPYTER_CONFIG_PATH="$(CURDIR)/grading/student_lab" $(BIN)/jupyter lab notebooks/

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
