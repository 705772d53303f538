"""Shadow reads: the app's live requests replayed on the stores that do not serve.

Entry: `served` (the served side: sampling, the bounded queue, the targets). `link` is the
pipe to the worker process (`worker`), which judges each replay with `compare` and keeps
it with `records`; `window` flushes and aggregates the rolling window for shadow_parity.
"""
