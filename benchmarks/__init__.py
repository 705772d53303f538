"""The project's benchmarks, one package per topic; figures go to docs/BENCHMARKS.md.

Entry: `__main__` (`python -m benchmarks NAME [options]`; `--list` names every benchmark, what it
measures and the docs/BENCHMARKS.md sections it writes). `registry` collects the benchmarks each
topic's `benchmark` module declares. Topics: load (bulk loads, first builds, incremental
drops), embedding (stage, peak RSS, runtimes), throughput (per core, Ray, one shared reader),
retrieval (quality, latency, layouts, per-stage effort, Qdrant local mode), scale (the cost
curve, SCALE.md's inputs, bytes per row), filters, churn, cold_start, shadow, generations, app
(candle-fire's search path through open_collection()), retirement (the way back: unretire).
`common` holds what they share: measurement, the docs section, the options, the workload.
"""
