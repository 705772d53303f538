"""`candlefire backup enable | take | list | prune` and `candlefire restore`: the embedded
server's base backups with WAL archived beside them (the newest kept, the rest pruned), and a
restore to the end of the archive or to a point, the ledger re-applied and the store checked
(docs/OPERATIONS.md, "Backup and restore")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from candlefire_pipeline.settings import Settings, redact_dsn


def add_parser(add) -> None:
    backup = add("backup", help="base backups of the embedded Postgres, WAL archived beside them")
    verbs = backup.add_subparsers(dest="backup_verb", required=True)
    for name, help_text in (
        ("enable", "archive WAL from now on (restarts the embedded server once)"),
        ("take", "a new base backup (pg_basebackup), with its manifest"),
        ("list", "the backups and what each holds"),
    ):
        verb = verbs.add_parser(name, help=help_text)
        _backup_dir(verb)
    prune = verbs.add_parser(
        "prune", help="keep the newest backups and the WAL they need; remove the rest"
    )
    _backup_dir(prune)
    prune.add_argument("--keep", type=int, default=2, help="backups kept (default 2)")
    prune.add_argument("--apply", action="store_true", help="remove (default: say what would go)")
    restore = add("restore", help="restore a backup as data/pg, re-apply the ledger, check it")
    _backup_dir(restore)
    restore.add_argument("--backup", help="the backup's label (default: the latest)")
    restore.add_argument("--to", help="replay the WAL up to this ISO time or LSN (0/3000060)")
    restore.add_argument(
        "--reconcile-only",
        action="store_true",
        help="no restore: re-apply the ledger and check a Postgres restored by other means",
    )


def _backup_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backup-dir", type=Path, help="default: <data dir>/backups")


def _folder(args: argparse.Namespace, settings: Settings) -> Path:
    from candlefire_pipeline.operations.backup.commands import default_backup_dir

    return args.backup_dir or default_backup_dir(settings)


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when done, 2 on an error (one line)."""
    from candlefire_pipeline.operations.backup import commands
    from candlefire_pipeline.operations.backup.prune import prune

    folder = _folder(args, settings)
    try:
        if args.backup_verb == "enable":
            already = commands.enable_archiving(settings, folder)
            print(f"WAL archived into {folder / 'wal'}" + (" (already on)" if already else
                  " from now on (the embedded server was restarted)"))  # fmt: skip
        elif args.backup_verb == "take":
            print(f"backup {commands.take_backup(settings, folder).describe()}")
        elif args.backup_verb == "prune":
            print("\n".join(prune(folder, args.keep, args.apply).lines(args.apply)))
        else:
            found = commands.backups(folder)
            print("\n".join(m.describe() for m in found) or f"no backup under {folder}")
    except commands.BackupError as exc:
        print(f"candlefire backup {args.backup_verb}: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when restored (or reconciled) and every check passed; 1 when a reconcile-only
    run found problems; 2 on an error (data/pg untouched)."""
    from candlefire_pipeline.backends.factory import resolve_dsn
    from candlefire_pipeline.operations.backup import commands

    try:
        if args.reconcile_only:
            report = commands.reconcile_only(settings, resolve_dsn(settings))
            print(f"reconciled {redact_dsn(resolve_dsn(settings))}")
            print("\n".join(f"  {line}" for line in report.lines()))
            return 0 if report.ok else 1
        result = commands.restore(settings, _folder(args, settings), args.backup, args.to)
    except commands.BackupError as exc:
        print(f"candlefire restore: {exc}", file=sys.stderr)
        return 2
    print(f"restored backup {result.manifest.label} to {result.to or 'the end of the archive'} "
          f"in {result.total_seconds:.1f} s (replay {result.replay_seconds:.1f} s)")  # fmt: skip
    print("\n".join(f"  {line}" for line in result.reconciled.lines()))
    if result.replaced is not None:
        print(f"  the data directory it replaced is kept in {result.replaced}")
    return 0


COMMANDS = {"backup": cmd_backup, "restore": cmd_restore}
