"""The serving switch: what the app reads, who may change it, and its history.

Entry: `commands` (auto_promote, promote, rollback). `state` holds the switch file's data,
`machine` the transition table and `read_state`, `guards` its conditions, `watch` the
windows of evidence while serving, `generation` promote --generation, `history` the
Postgres table with its local queue, `follow` how an app process follows the switch.
"""
