"""Qdrant: the backend, filters, points, local mode (one process per folder) and server access."""
