"""Backup and restore of the embedded Postgres: a base backup with WAL archived beside it, a
restore to the end of the archive or to a point, then the ledger re-applied and the store
checked. Entry: `commands` (backup, restore, reconcile_only)."""
