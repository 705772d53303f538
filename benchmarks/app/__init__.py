"""The candle-fire app's search path through its Collection API: `open_collection()` on pgvector
from 62k to 1M chunks, vs the real Chroma collection, with `ServingReader` beside them.

Entry: `benchmark` (the `app` benchmark). `run` runs it per size of the scale corpus:
`side_by_side` the three arms interleaved at the first size, `scaled` the collection warm, cold,
against the exact referee and shared by app threads; `search_path` is candle-fire's search path
written against the Collection API (the collection tests run it too), `counting` wraps each arm
to count its calls, `agreement` says whether two arms answered alike and why not, `report`
writes the section.
"""
