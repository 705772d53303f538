"""Filters: semantic queries under the protocol's Filter (years, full text, pmids) at falling
selectivity, on every store, against the exact oracle.

Entry: `benchmark` (the `filters` benchmark). `queries` runs it over the cases `cases` makes
(filters of a target selectivity) and measures.
"""
