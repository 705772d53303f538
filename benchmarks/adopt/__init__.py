"""The adoption of the app's own collection: report and import against a bare paginated get.

Entry: `benchmark` (the `adopt` benchmark). `run` measures it: per size, `collection` builds an
app collection by candle-fire's indexing rules and `child` runs each operation in a fresh process.
"""
