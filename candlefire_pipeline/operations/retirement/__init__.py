"""Retiring a store once the new one has served on evidence, and the way back to it.

Entry: `commands` (retire, unretire). `view` says which stores are retired and still written
(the switch records it) and holds the lock a retirable store's writers share; `soak` reads
the soak's evidence from the switch history; `rebuild` rebuilds a retired store from the
ledger's batch files and checks it; `files` exports the ledger state and deletes the files.
"""
