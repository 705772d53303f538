"""Index generations: one immutable identity (model, chunker, store layout) each, with its own
targets and ledger (docs/GENERATIONS.md).

Entry: `registry` (the live generations). `identity` names a generation, `view` gives its
settings, `batches` its ledger directory, `sizes` its bytes per store, `served` when it served.
"""
