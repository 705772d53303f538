"""Scale: what the corpus costs as it grows, and the inputs of the capacity plan (docs/SCALE.md).

Entry: `benchmark` (the `scale`, `scale-inputs` and `pg-sizes` benchmarks). `cost_curve` runs
the cost curve from 62k to 1M chunks on the workload at any size (common/scaled), measuring
requests with `queries` and rendering with `report`; `inputs` reads the corpus shape from the
shared samples; `pg_sizes` measures pgvector's bytes per row.
"""
