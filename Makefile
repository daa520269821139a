PYTHON ?= python3

.PHONY: install install-all test test-all lint bench example

install:
	$(PYTHON) -m pip install -e '.[test,local]'

install-all:
	$(PYTHON) -m pip install -e '.[test-all,local]'

test:
	$(PYTHON) -m pytest

# every test: the default run, then the marked ones (needs `make install-all`)
test-all:
	$(PYTHON) -m pytest
	$(PYTHON) -m pytest -n 0 -m 'slow or bench or ray or browser'

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy

bench:
	@for f in bench/bench_*.py; do echo "== $$f"; $(PYTHON) $$f || exit 1; done

example:
	evalrun evals/contextual-precision.eval.yaml --target local
