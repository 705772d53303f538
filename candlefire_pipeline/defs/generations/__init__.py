"""Each live generation's Dagster definitions besides the default's.

Entry: `definitions` (every generation's assets and checks from the registry). `assets`,
`checks` and `parity` build one generation's; `build` is `candlefire generation build`.
"""
