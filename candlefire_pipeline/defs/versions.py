"""Code versions: what makes an asset's output change, so the UI marks downstream assets stale."""

from candlefire_pipeline.settings import EMBED_RUNTIMES, Settings

#: Bump when the embedding stage itself changes what it writes (pooling, normalization, layout).
EMBEDDING_STAGE_VERSION = "1"


def embedding_code_version(settings: Settings) -> str:
    """The single place that says which settings change the vectors.

    The bulk runtime counts only when its vectors differ: fp32 torch and fp32 ONNX make the same
    vectors (embedding.model_files.embedding_identity), int8 does not.
    """
    parts = [f"stage={EMBEDDING_STAGE_VERSION}", f"model={settings.model_id}"]
    runtime = settings.embed_runtime_bulk
    if EMBED_RUNTIMES[runtime] != "fp32":
        parts.append(f"runtime={runtime}")
    return ";".join(parts)
