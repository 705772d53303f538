"""Tests of backends/pg/."""
