# Each target creates .venv and installs the project into it when missing.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed

.PHONY: demo test bench setup clean proofs fuzz

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip "setuptools>=68" wheel
	$(VPY) -m pip install -q -e .[plot]
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tilecert demo

test: $(STAMP)
	$(VPY) -m pytest

# a bounded campaign on two local dask worker processes; failing cases land in fuzz-failures/
fuzz: $(STAMP)
	$(VENV)/bin/tilecert fuzz --cases 40 --workers 2 --out fuzz-failures

proofs: $(STAMP)
	@status=0; for f in proofs/*.py; do [ "$$f" = proofs/lemma.py ] && continue; \
		$(VPY) $$f || status=1; done; exit $$status

bench: $(STAMP)
	$(VPY) benchmarks/interp.py
	$(VPY) benchmarks/checker.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(VPY) benchmarks/gemm_c.py
	$(VPY) benchmarks/gemm_cuda.py
	$(VPY) benchmarks/replay.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
