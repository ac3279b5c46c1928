# Two commands on a fresh machine: `make demo` (set up + main job) and `make test` (set up + tests,
# and the documentation site's strict build). `make docs` serves the site while docs/ is edited;
# `make demo-reverse` is the length-generalisation example.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-reverse test lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The CPU build of torch first: an unpinned torch would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test,docs]'
	touch $(STAMP)

# English->German on the corpus in demo/en-de/: prepare it, train (a re-run resumes), translate
# demo/samples.en, score the test set.
demo: $(STAMP)
	$(BIN)/transduce prepare demo/en-de --src en --tgt de -o runs/demo-data --vocab-size 4000
	$(BIN)/transduce train configs/demo.toml --run-dir runs/demo
	$(BIN)/transduce translate runs/demo -i demo/samples.en -o runs/demo-samples.de
	@echo "demo/samples.en, translated (beam 4):"; paste demo/samples.en runs/demo-samples.de
	$(BIN)/transduce evaluate runs/demo --src demo/en-de/test.en --ref demo/en-de/test.de

# The length-generalisation example: the small preset learns to reverse digit strings and fails
# on twice-longer ones.
demo-reverse: $(STAMP)
	$(BIN)/transduce train configs/reverse.toml --run-dir runs/reverse

test: $(STAMP)
	# Debian's chromium for the demo page's browser test (skipped, with the reason, if this fails).
	-@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null 2>&1 \
		|| (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) \
		|| echo "chromium could not be installed; the browser test will be skipped"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	# Two worker processes, a test file each at a time (its module fixtures built once): 2 cores.
	$(BIN)/python -m pytest -n 2 --dist loadfile
	# The site: a broken link, a missing anchor or an API page naming a missing module fails it.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/python -m bench.decode.speed

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) runs site
