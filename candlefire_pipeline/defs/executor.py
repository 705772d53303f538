"""The executor from settings: in-process locally, multiprocess to run partitions in parallel."""

import dagster as dg

from candlefire_pipeline.settings import executor_mode


def pipeline_executor() -> dg.ExecutorDefinition:
    mode, max_concurrent = executor_mode()
    if mode == "multiprocess":
        return dg.multiprocess_executor.configured({"max_concurrent": max_concurrent})
    return dg.in_process_executor
