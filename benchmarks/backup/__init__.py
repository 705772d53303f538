"""Backup and restore of the embedded Postgres at 62k (and 1M) chunks.

Entry: `benchmark` (the `backup` benchmark). `run` times `candlefire backup take` and a restore
after the data directory is lost (SIGKILL, then deleted), drops having been accepted after the
backup; `report` writes the section.
"""
