"""Embeds with an exported ONNX model and the model's own tokenizer; never imports torch."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from candlefire_pipeline.embedding.length_groups import length_groups
from candlefire_pipeline.embedding.model_files import embedding_identity
from candlefire_pipeline.embedding.onnx_artifacts import OnnxArtifact, ensure_onnx_model
from candlefire_pipeline.settings import Settings

#: ONNX variant behind each ONNX runtime name.
ONNX_VARIANTS = {"onnx": "fp32", "onnx-int8": "int8"}
#: default token budget per ONNX call, in texts of the model's full max_seq_length
FULL_LENGTH_TEXTS_PER_CALL = 16
#: What one ONNX call costs beyond its padded tokens, in token equivalents; it decides where
#: length_groups splits a request. Measured with `python -m benchmarks onnx-call-cost` (fastest
#: of 15 calls per shape, 1-16 texts x 4-64 tokens, least-squares fit) on this 2-CPU AMD EPYC
#: VM, 2026-12-01, 1-min load 2.5-2.9: fp32 1.1-1.5 ms per call + 152-155 us per padded
#: token = 7-10 tokens; int8 0.7 ms + 97 us = 7 tokens. A query + 12 names then goes as 2-3
#: calls of ~120 padded tokens instead of one of ~320; chunks at max_seq_length are unaffected.
CALL_OVERHEAD_TOKENS = 10
_SESSIONS: dict[Path, object] = {}
_SESSIONS_LOCK = threading.Lock()


class OnnxTextEncoder:
    """Tokenizes like sentence-transformers: its max_seq_length, padded per batch."""

    def __init__(self, artifact: OnnxArtifact) -> None:
        from tokenizers import Tokenizer

        manifest = artifact.manifest
        self.tokenizer = Tokenizer.from_file(str(artifact.tokenizer_path))
        # tokenizer.json files often carry a fixed padding/truncation of their own (128 for
        # MiniLM); sentence-transformers overrides both, so do we. Padding is done per batch.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.max_seq_length = int(manifest["max_seq_length"])
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.pad_id = int(manifest["pad_id"])
        self.pad_left = manifest["padding_side"] == "left"
        self.inputs = list(manifest["inputs"])

    def tokenize(self, texts: Sequence[str]) -> list:
        """Unpadded encodings (ids, attention mask, type ids) of each text."""
        return self.tokenizer.encode_batch(list(texts))

    def feeds(self, encodings: Sequence) -> dict[str, np.ndarray]:
        """The model's int64 input arrays for a batch, padded to its longest text."""
        width = max(len(e.ids) for e in encodings)
        pads = {"input_ids": self.pad_id, "attention_mask": 0, "token_type_ids": 0}
        out = {}
        for name in self.inputs:
            array = np.full((len(encodings), width), pads[name], dtype=np.int64)
            for row, encoding in enumerate(encodings):
                values = _FIELDS[name](encoding)
                if self.pad_left:
                    array[row, width - len(values) :] = values
                else:
                    array[row, : len(values)] = values
            out[name] = array
        return out

    def encode(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Input arrays for one batch of texts."""
        return self.feeds(self.tokenize(texts))


_FIELDS = {
    "input_ids": lambda e: e.ids,
    "attention_mask": lambda e: e.attention_mask,
    "token_type_ids": lambda e: e.type_ids,
}


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
        self,
        model_id: str,
        onnx_dir: Path,
        runtime: str = "onnx",
        batch_size: int = Settings.embed_batch_size,
        max_tokens: int | None = None,
        call_overhead_tokens: float = CALL_OVERHEAD_TOKENS,
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
        #: padded tokens per ONNX call; bounds activation memory (about 650 MB peak RSS with
        #: MiniLM at 16 full-length texts, 2 GB at 64)
        self.max_tokens = max_tokens or FULL_LENGTH_TEXTS_PER_CALL * self.encoder.max_seq_length
        self.call_overhead_tokens = call_overhead_tokens

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

    def groups(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices of the texts per ONNX call for these token counts (see length_groups)."""
        return length_groups(lengths, self.batch_size, self.max_tokens, self.call_overhead_tokens)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.encoder.tokenize(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for group in self.groups([len(e.ids) for e in encodings]):
            feeds = self.encoder.feeds([encodings[i] for i in group])
            out[group] = run_session(self.session, feeds)
        return out
