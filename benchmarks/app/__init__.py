"""The candle-fire app's search path through its Collection API: `open_collection()` on pgvector
vs the real Chroma collection, with `ServingReader` beside them.

Entry: `benchmark` (the `app` benchmark). `side_by_side` runs it: the three arms interleaved on
the 62k workload; `search_path` is candle-fire's search path written against the Collection
API (the collection tests run it too), `counting` wraps each arm to count its calls, `agreement`
says whether two arms answered alike and why not, `report` writes the section.
"""
