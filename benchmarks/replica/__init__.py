"""The read replica: its lag during drops on the 62k workload, and what the app's reader serves
while it lags.

Entry: `benchmark` (the `replica` benchmark). `lag` runs it: a primary and its hot standby, two
drops with `probe`'s lag sampler and app reader beside each, `report` writes the section.
"""
