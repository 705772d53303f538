"""Progress of long steps as run log lines (the UI, `candlefire demo`), marked as progress."""

from collections.abc import Callable

import dagster as dg

#: Prefix of progress log lines; `candlefire demo` shows these while a step runs.
PROGRESS_PREFIX = "progress: "


def progress_logger(context: dg.AssetExecutionContext) -> Callable[[str], None]:
    """A core `progress` callback that writes each message to the run's log."""

    def emit(message: str) -> None:
        context.log.info(PROGRESS_PREFIX + message)

    return emit
