PYTHON ?= python3

.PHONY: install test lint bench example

install:
	$(PYTHON) -m pip install -e '.[test,local]'

test:
	$(PYTHON) -m pytest

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

bench:
	@for f in bench/bench_*.py; do echo "== $$f"; $(PYTHON) $$f || exit 1; done

example:
	evalrun evals/contextual-precision.eval.yaml --target local
