# papa: `make test` and `make reproduce` do all set-up on a fresh machine (a virtual environment in .venv).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch first, alone: with torch==2.13.0 already installed nothing pulls another build. On a CPU-only Linux machine
# add TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" to skip the CUDA wheels.
TORCH_INDEX ?=
# The local data directory (GLUE TSVs, CoNLL-2003, WikiText); unset it to use the Hugging Face hub.
export PAPA_DATA_DIR ?= $(abspath ../shared/data)
PROFILE ?= quick

.PHONY: test reproduce install lock clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0 $(TORCH_INDEX)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test]"
	touch $@

test: install
	$(PY) -m pytest

reproduce: install
	$(VENV)/bin/papa reproduce --profile $(PROFILE)

lock: install
	{ head -2 constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^papa' | sed 's/+cpu$$//'; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
