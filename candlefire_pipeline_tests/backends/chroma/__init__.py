"""Tests of backends/chroma/."""
