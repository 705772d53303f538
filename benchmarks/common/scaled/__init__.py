"""The retrieval workload at any size, and its stores, built once and reused by every benchmark
that measures more than the 62k corpus (scale, filters, effort, cold_start, concurrency).

Entry: `stores` (ensure_pg_table, load_chroma, load_qdrant: the size's stores, built unless
cached). `corpus` streams the corpus of a size in slices (ScaleCorpus), `tables` first-builds a
pgvector table of it in phases and swaps each layout's HNSW index in (with the server's memory).
"""
