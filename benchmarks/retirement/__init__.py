"""Retirement: the way back after Chroma was retired, `unretire`, against Chroma's first load.

Entry: `benchmark` (the `unretire` benchmark). `rebuild_cost` runs it; `ledger` writes the
workload as ingest batch files and puts Chroma in the retired state; `child` runs one measured
operation in a fresh process, with `parts` timing unretire's parts; `report` writes the section.
"""
