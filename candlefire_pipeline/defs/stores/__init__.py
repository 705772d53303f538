"""The store assets and their checks and policies (pgvector, Chroma, Qdrant).

Entry: `assets`. `checks` are the blocking store checks, `policies` the pools and retries.
"""
