"""What an app process holds of a store: the bytes of its files in the app's data dir."""

from __future__ import annotations

from candlefire_pipeline.settings import Settings


def app_bytes(settings: Settings) -> int:
    """Bytes of store files in the app's data dir (the switch file and the model cache aside)."""
    total = 0
    for path in settings.data_dir.rglob("*"):
        if not path.is_file() or path == settings.serving_file:
            continue
        if settings.onnx_dir in path.parents:
            continue
        total += path.stat().st_size
    return total
