"""papa's benchmarks: the performance suite, the GPU check and the cost estimates, each module run from the
repository's root as ``python -m benchmarks.<name>`` (``python -m benchmarks.bench --quick``) and imported by the
tests and docs/gen_measurements.py by name (``from benchmarks import grid_estimate``). Not installed with papa."""
