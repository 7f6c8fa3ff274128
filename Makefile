# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make demo   create .venv, install tether, index examples/docs, run scoped searches and
#               print the cited context an LLM would get
#   make test   create .venv if needed, install Debian's chromium (the console's browser
#               tests) and tesseract-ocr (OCR) with scripts/install-debian-packages.sh,
#               run the whole test suite (and ruff)
#   make test-fast   the suite without its slow and browser tests (minutes, not a quarter hour)
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DB := .demo/tether.db

.PHONY: demo test test-fast lint fmt eval clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,local,onnx,openai,langgraph,llamaindex,haystack,languages,watch,server,postgres,formats,ocr]'
	@touch $(STAMP)

demo: $(STAMP)
	@rm -rf .demo && mkdir -p .demo
	$(BIN)/tether add --db $(DEMO_DB) --workspace lumen --session support-chat examples/docs/*
	$(BIN)/tether add --db $(DEMO_DB) --global examples/docs/support-faq.txt
	@echo; echo '$$ tether search "how do I reset the sensor" --scope session --session support-chat --k 3'
	@$(BIN)/tether search --db $(DEMO_DB) "how do I reset the sensor" --scope session --session support-chat --k 3
	@echo; echo '$$ tether search "battery replacement under warranty" --scope workspace --workspace lumen --k 3'
	@$(BIN)/tether search --db $(DEMO_DB) "battery replacement under warranty" --scope workspace --workspace lumen --k 3
	@echo; echo '$$ tether search "battery replacement under warranty" --scope global --k 3'
	@$(BIN)/tether search --db $(DEMO_DB) "battery replacement under warranty" --scope global --k 3
	@echo; echo '$$ tether context "how long is the battery covered by the warranty?" --scope session --session support-chat'
	@$(BIN)/tether context --db $(DEMO_DB) "how long is the battery covered by the warranty?" --scope session --session support-chat

test: $(STAMP)
	./scripts/install-debian-packages.sh
	$(BIN)/ruff check src tests examples
	$(BIN)/python -m pytest

# The edit-and-run loop: everything but the tests marked slow (whole datasets, real
# servers killed and restarted, the local model end to end, the longest property tests)
# and the browser's, on every core (pytest-xdist).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not browser" -n auto

lint: $(STAMP)
	$(BIN)/ruff check src tests examples
	$(BIN)/ruff format --check src tests examples

fmt: $(STAMP)
	$(BIN)/ruff check --fix src tests examples
	$(BIN)/ruff format src tests examples

eval: $(STAMP)
	$(BIN)/tether eval ../shared/datasets/scifact

clean:
	rm -rf $(VENV) .demo .pytest_cache .ruff_cache
