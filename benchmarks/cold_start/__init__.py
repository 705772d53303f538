"""Cold start: from a fresh process to its first answer, per store.

Entry: `benchmark` (the `cold-start` benchmark). `first_answer` runs it, each start a new
interpreter running `child` (imports, fetch, model load, store open, first answer, stamped) or,
for the flipped candle-fire app, `collection_child` (open_collection() and candle-fire's search
path, stamped alike); `held` counts the store bytes an app holds.
"""
