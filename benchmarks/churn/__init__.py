"""Churn: what months of update drops do to a pgvector table's HNSW graph, its bytes and its p95.

Entry: `benchmark` (the `churn` benchmark). `soak` runs it: drops made by `revisions` go
through `loop` (checkpoints against the exact oracle, maintenance as the product runs it),
`reindex` serves requests while the indexes are rebuilt, `report` writes the section.
"""
