"""Code versions: what makes an asset's output change, so the UI marks downstream assets stale."""

from candlefire_pipeline.settings import Settings

#: Bump when the embedding stage itself changes what it writes (pooling, normalization, layout).
EMBEDDING_STAGE_VERSION = "1"


def embedding_code_version(settings: Settings) -> str:
    """The single place that says which settings change the vectors.

    Add the runtime here once settings carry it (CANDLEFIRE_EMBED_RUNTIME): vectors from
    runtimes that differ must give a different code version.
    """
    parts = [f"stage={EMBEDDING_STAGE_VERSION}", f"model={settings.model_id}"]
    return ";".join(parts)
