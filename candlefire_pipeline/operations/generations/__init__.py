"""Index generations as operator verbs: create, list, compare, gc.

Entry: `lifecycle` (create, list). `compare` is the proof a generation needs before it
serves, `quality` its judged-set ranking, `gc` drops the generations nobody needs.
"""
