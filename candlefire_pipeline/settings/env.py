"""Typed readers of environment variables; every error names the variable and the bad value."""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

#: Renamed variables: new name -> the old one, still read for one release when the new one is
#: unset, with a deprecation line naming the new one (docs/OPERATIONS.md, settings table).
RENAMED = {
    "CANDLEFIRE_PARITY_CRON": "CANDLEFIRE_INGEST_CRON",
    "CANDLEFIRE_RUN_EXECUTOR": "CANDLEFIRE_EXECUTOR",
    "CANDLEFIRE_RUN_MAX_CONCURRENT": "CANDLEFIRE_MAX_CONCURRENT",
}
_WARNED: set[str] = set()


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name, "").strip()
    if not value and name in RENAMED:
        value = _deprecated(RENAMED[name], name)
    return value or default


def _deprecated(old: str, new: str) -> str:
    value = os.environ.get(old, "").strip()
    if value and old not in _WARNED:
        _WARNED.add(old)  # once per process: settings are read at every run and tick
        log.warning("%s is deprecated and read until the next release: set %s instead", old, new)
    return value


def check_choice(name: str, value: str, choices: Collection[str]) -> str:
    """`value` when it is one of `choices`; else an error naming the setting and the choices."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def check_between(name: str, value: int, low: int, high: int) -> int:
    """`value` when low <= value <= high; else an error naming the setting and the range."""
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:,} and {high:,}, got {value}")
    return value


def env_choice(name: str, default: str, choices: Collection[str]) -> str:
    """A variable (case-insensitive) that must be one of `choices`; `default` when unset."""
    return check_choice(name, (env_str(name) or default).lower(), choices)


def _env_parsed(name: str, default, parse, kind: str):
    """The variable parsed by `parse` (`default` when unset); an error naming `kind` else."""
    raw = env_str(name)
    try:
        return parse(raw) if raw is not None else default
    except ValueError as exc:
        raise ValueError(f"{name} must be {kind}, got {raw!r}") from exc


def env_int(name: str, default: int) -> int:
    return _env_parsed(name, default, int, "an integer")


def env_positive_int(name: str, default: int) -> int:
    value = env_int(name, default)
    if value < 1:
        raise ValueError(f"{name} must be >= 1 (a positive integer), got {value}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be true or false, got {raw!r}")


def env_path(name: str) -> Path | None:
    raw = env_str(name)
    return Path(raw).expanduser().resolve() if raw else None


def env_float(name: str, default: float) -> float:
    return _env_parsed(name, default, float, "a number")


def env_positive_float(name: str, default: float) -> float:
    value = env_float(name, default)
    # NaN fails the comparison, so it is refused too
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def env_fields(
    section: type,
    variables: Mapping[str, str],
    choices: Mapping[str, Collection[str]] | None = None,
) -> dict:
    """Fields of a settings section from their variables (`variables`: field -> variable), each
    read as the type of the field's default (bool, int, float or str; a field with `choices`
    lower-cased and one of them); an unset variable keeps the default."""
    readers = {bool: env_bool, int: env_int, float: env_float, str: env_str}
    values = {}
    for field, variable in variables.items():
        default = getattr(section, field)
        if choices and field in choices:
            values[field] = env_choice(variable, default, choices[field])
        else:
            values[field] = readers[type(default)](variable, default)
    return values
