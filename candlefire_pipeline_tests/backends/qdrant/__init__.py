"""Tests of backends/qdrant/."""
