"""Loading the stores: bulk-load rates and a first build's phases (pgvector, Chroma, Qdrant), and
an incremental drop against a full build.

Entry: `benchmark` (the `load` and `incremental` benchmarks). `bulk` runs the load benchmark
with `pg` (the Postgres load methods), `chroma`, `qdrant` and `rows` (synthetic rows);
`incremental` runs the drop benchmark on SciFact split by `drops`.
"""
