"""papa's speed suite, its GPU check and the cost model, each run from the repository's root as
``python -m benchmarks.<name>`` (docs/performance.md, docs/scaling.md); imported by their tests. Not installed."""
