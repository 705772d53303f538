"""Drop-file parsing, validation and candle-fire chunking (no Dagster)."""
