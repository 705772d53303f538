"""Conformance: the retriever against candle-fire's own recorded answers, stage by stage.

Entry: `check` (check a store against the fixtures). `fixtures` reads the recording,
`lists` compares one stage list and explains the recording's own ANN misses.
"""
