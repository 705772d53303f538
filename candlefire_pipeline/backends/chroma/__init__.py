"""Chroma: the backend and its client (embedded PersistentClient or an HTTP server)."""
