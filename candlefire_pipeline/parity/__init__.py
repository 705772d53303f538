"""Dual-read parity: the same queries through the full retriever on Chroma, pgvector and the
exact oracle, a report of every divergence, and the gates that decide the serving flip."""
