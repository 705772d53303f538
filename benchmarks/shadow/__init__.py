"""Shadow reads: what replaying served requests on the other store costs the served ones.

Entry: `benchmark` (the `shadow` benchmark and its scenarios). `under_load` runs it: client
threads through the app-facing reader, shadowing off / on / on / off in one process.
"""
