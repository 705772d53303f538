"""Retrieval: what the stores answer and how fast, on SciFact and the 62k-chunk workload.

Entry: `benchmark` (the `retrieval`, `effort` and `qdrant` benchmarks). `parts` runs the
retrieval benchmark part by part: `quality` (SciFact nDCG@10 / recall@100), `latency` and
`latency_report` (full retrieve() by stage, agreement, fan-out profile, grounding), `layouts`
(vector / halfvec / binary), `qdrant_part` (Qdrant beside them). `effort` sweeps the per-stage
ANN effort on three builds, with `fanout`; `qdrant_local` measures Qdrant local mode itself.
"""
