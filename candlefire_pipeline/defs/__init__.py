"""The Dagster layer: it only wires the Dagster-free core."""
