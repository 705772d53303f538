"""Embeds with an exported ONNX model and the model's own tokenizer; never imports torch."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from candlefire_pipeline.embedding.model_files import embedding_identity
from candlefire_pipeline.embedding.onnx_artifacts import OnnxArtifact, ensure_onnx_model

#: ONNX variant behind each ONNX runtime name.
ONNX_VARIANTS = {"onnx": "fp32", "onnx-int8": "int8"}
_SESSIONS: dict[Path, object] = {}
_SESSIONS_LOCK = threading.Lock()


class OnnxTextEncoder:
    """Tokenizes like sentence-transformers: its max_seq_length, pad to the longest in a batch."""

    def __init__(self, artifact: OnnxArtifact) -> None:
        from tokenizers import Tokenizer

        manifest = artifact.manifest
        self.tokenizer = Tokenizer.from_file(str(artifact.tokenizer_path))
        # tokenizer.json files often carry a fixed padding/truncation of their own (128 for
        # MiniLM); sentence-transformers overrides both, so do we.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.tokenizer.enable_truncation(max_length=int(manifest["max_seq_length"]))
        self.tokenizer.enable_padding(
            direction=manifest["padding_side"],
            pad_id=int(manifest["pad_id"]),
            pad_token=manifest["pad_token"],
        )
        self.inputs = list(manifest["inputs"])

    def encode(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The model's input arrays (int64) for a batch of texts."""
        encodings = self.tokenizer.encode_batch(list(texts))
        columns = {
            "input_ids": [e.ids for e in encodings],
            "attention_mask": [e.attention_mask for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
        }
        return {name: np.asarray(columns[name], dtype=np.int64) for name in self.inputs}


def _session(model_path: Path):
    """One InferenceSession per model file and process (sessions are thread-safe to run)."""
    with _SESSIONS_LOCK:
        if model_path not in _SESSIONS:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # warnings about unused initializers are not ours
            _SESSIONS[model_path] = ort.InferenceSession(
                str(model_path), options, providers=["CPUExecutionProvider"]
            )
        return _SESSIONS[model_path]


def run_session(session, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """L2-normalized float32 rows of one batch, as sentence-transformers' normalize does it."""
    (vectors,) = session.run(None, feeds)
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


class OnnxEmbedder:
    """An Embedder on ONNX Runtime; the dimension comes from the exported model itself."""

    def __init__(
        self, model_id: str, onnx_dir: Path, runtime: str = "onnx", batch_size: int = 64
    ) -> None:
        if runtime not in ONNX_VARIANTS:
            raise ValueError(f"ONNX runtime must be one of {sorted(ONNX_VARIANTS)}: {runtime!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.runtime = runtime
        self.batch_size = batch_size
        self.model_id = embedding_identity(model_id, runtime)
        self.artifact = ensure_onnx_model(model_id, ONNX_VARIANTS[runtime], Path(onnx_dir))
        self.encoder = OnnxTextEncoder(self.artifact)
        self.session = _session(self.artifact.model_path)
        self.dim = self._read_dim()

    def _read_dim(self) -> int:
        declared = int(self.artifact.manifest["dim"])
        shape = self.session.get_outputs()[0].shape
        if isinstance(shape[-1], int) and shape[-1] != declared:
            raise ValueError(
                f"{self.artifact.model_path} outputs {shape[-1]} dimensions but its manifest"
                f" says {declared}; delete {self.artifact.path} to re-export it"
            )
        wanted = {i.name for i in self.session.get_inputs()}
        if wanted != set(self.encoder.inputs):
            raise ValueError(
                f"{self.artifact.model_path} takes inputs {sorted(wanted)}, its manifest lists"
                f" {self.encoder.inputs}; delete {self.artifact.path} to re-export it"
            )
        return declared

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            part = texts[start : start + self.batch_size]
            out[start : start + len(part)] = run_session(self.session, self.encoder.encode(part))
        return out
