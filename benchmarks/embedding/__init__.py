"""Embedding: the stage against the raw model, a whole build's peak memory, and the runtimes.

Entry: `benchmark` (the `embedding`, `runtime` and `onnx-call-cost` benchmarks). `stage` runs
the stage against the raw model, `rss` the peak-RSS children; `runtime` compares the runtimes
with `speed` (query path, bulk) and `agreement` (cosine, nDCG@10 on SciFact); `call_cost` fits
one ONNX call's overhead.
"""
