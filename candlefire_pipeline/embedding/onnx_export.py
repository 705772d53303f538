"""Exports a sentence-transformers model to ONNX and proves it agrees before publishing it.

Run by onnx_artifacts in a subprocess (torch is imported here and nowhere on the ONNX path):
  python -m candlefire_pipeline.embedding.onnx_export --source DIR --out DIR --variant fp32 ...
To prepare a deployment ahead of its first query (same cache, same lock):
  python -m candlefire_pipeline.embedding.onnx_export --prepare [--runtime onnx|onnx-int8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from candlefire_pipeline.embedding.onnx_artifacts import (
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    MODEL_FILE,
    TOKENIZER_FILE,
    OnnxArtifact,
    file_sha256,
)

#: fp32 ONNX shares the torch model's identity only above these (checked on PROBE_TEXTS).
FP32_MIN_MEAN_COSINE = 0.9999
FP32_MIN_COSINE = 0.999
#: int8 has an identity of its own; below this it is not worth offering at all.
INT8_MIN_MEAN_COSINE = 0.98
TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

PROBE_TEXTS = [
    "",
    "ALS",
    "SOD1",
    "  leading and trailing whitespace  ",
    "Tofersen lowers SOD1 protein in cerebrospinal fluid of SOD1-ALS patients.",
    "C9orf72 hexanucleotide repeat expansions cause ALS and frontotemporal dementia.",
    "Neurofilament light chain (NfL) as a prognostic biomarker: a 2019 cohort, n=1,204.",
    "Überraschende Ergebnisse: ß-Amyloid, α-synuclein and TDP-43 — co-pathology in 42%.",
    "SPG302 restores synaptic density in TDP-43 models of ALS " * 40,
    "Riluzole\n[Methods]\nA randomized, double-blind, placebo-controlled trial of riluzole. " * 8,
    "!!! ??? ... ;;; ---",
    "motor neuron degeneration",
]


def _load_model(source: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(source, device="cpu", local_files_only=True)


def _text_features(model, texts: list[str]) -> dict:
    features = model.preprocess(texts)
    tensors = {k: v for k, v in features.items() if hasattr(v, "shape")}
    unknown = set(tensors) - set(TEXT_INPUTS)
    if unknown or "input_ids" not in tensors:
        raise SystemExit(f"unsupported model inputs {sorted(tensors)}: only text encoders export")
    return features


def _export_graph(model, features: dict, path: Path) -> list[str]:
    """torch.export-based ONNX export of the whole module stack (transformer, pooling, dense)."""
    import torch

    names = [k for k in TEXT_INPUTS if k in features]
    constants = {k: v for k, v in features.items() if not hasattr(v, "shape")}

    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            inputs = dict(zip(names, tensors, strict=True)) | constants
            return self.model(inputs)["sentence_embedding"]

    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    with torch.no_grad():
        torch.onnx.export(
            Stack().eval(),
            tuple(features[k] for k in names),
            str(path),
            input_names=names,
            output_names=["sentence_embedding"],
            # *tensors is one (tuple) argument to torch.export, hence the extra nesting
            dynamic_shapes=(tuple({0: batch, 1: seq} for _ in names),),
            dynamo=True,
            optimize=True,
            external_data=False,
        )
    return names


def _copy_tokenizer(model, source: Path, out: Path) -> None:
    """The model folder's tokenizer.json; models shipping only a vocab get theirs serialized."""
    if (source / TOKENIZER_FILE).is_file():
        shutil.copyfile(source / TOKENIZER_FILE, out / TOKENIZER_FILE)
    else:
        model.tokenizer.backend_tokenizer.save(str(out / TOKENIZER_FILE))


def _tokenizer_fields(model) -> dict:
    tokenizer = model.tokenizer
    if tokenizer.pad_token_id is None:
        raise SystemExit("the model's tokenizer has no padding token; batches cannot be padded")
    return {
        "max_seq_length": int(model.max_seq_length),
        "pad_id": int(tokenizer.pad_token_id),
        "pad_token": str(tokenizer.pad_token),
        "padding_side": str(getattr(tokenizer, "padding_side", "right")),
    }


def _onnx_vectors(out: Path, manifest: dict, texts: list[str], batched: bool) -> np.ndarray:
    import onnxruntime as ort

    from candlefire_pipeline.embedding.onnx_embedder import OnnxTextEncoder, run_session

    artifact = OnnxArtifact(out, manifest)
    encoder = OnnxTextEncoder(artifact)
    session = ort.InferenceSession(str(out / MODEL_FILE), providers=["CPUExecutionProvider"])
    if batched:
        return run_session(session, encoder.encode(texts))
    return np.vstack([run_session(session, encoder.encode([t])) for t in texts])


def _agreement(vectors: np.ndarray, reference: np.ndarray) -> dict:
    cosines = np.sum(vectors * reference, axis=1) / (
        np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
    )
    return {
        "probe_texts": len(cosines),
        "mean_cosine": float(cosines.mean()),
        "min_cosine": float(cosines.min()),
    }


def check_fp32_agreement(*agreements: dict) -> dict:
    """The worst of the agreements, or SystemExit when fp32 ONNX may not share torch's id."""
    worst = min(agreements, key=lambda a: (a["min_cosine"], a["mean_cosine"]))
    low_mean = min(a["mean_cosine"] for a in agreements)
    if low_mean < FP32_MIN_MEAN_COSINE or worst["min_cosine"] < FP32_MIN_COSINE:
        raise SystemExit(
            f"the ONNX export disagrees with torch (mean cosine {low_mean:.6f}, min"
            f" {worst['min_cosine']:.6f}); keep CANDLEFIRE_EMBED_RUNTIME=torch for this model"
        )
    return worst


def _check_tokens(model, out: Path, manifest: dict) -> None:
    from candlefire_pipeline.embedding.onnx_embedder import OnnxTextEncoder

    ours = OnnxTextEncoder(OnnxArtifact(out, manifest)).encode(PROBE_TEXTS)
    theirs = _text_features(model, PROBE_TEXTS)
    for name, array in ours.items():
        if not np.array_equal(array, theirs[name].numpy()):
            raise SystemExit(f"tokenizer.json does not reproduce the model's {name}")


def export_fp32(source: Path, out: Path) -> dict:
    model = _load_model(str(source))
    features = _text_features(model, PROBE_TEXTS[4:8])
    names = _export_graph(model, features, out / MODEL_FILE)
    _copy_tokenizer(model, source, out)
    reference = model.encode(PROBE_TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    manifest = {"inputs": names, "dim": int(reference.shape[1]), **_tokenizer_fields(model)}
    _check_tokens(model, out, manifest)
    batched = _agreement(_onnx_vectors(out, manifest, PROBE_TEXTS, True), reference)
    single = _agreement(_onnx_vectors(out, manifest, PROBE_TEXTS, False), reference)
    worst = check_fp32_agreement(batched, single)
    import torch

    exporter = f"torch {torch.__version__} torch.onnx.export(dynamo=True)"
    return {**manifest, "agreement": {"reference": "torch", **worst}, "exporter": exporter}


def export_int8(fp32_dir: Path, out: Path) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32_manifest = json.loads((fp32_dir / MANIFEST_FILE).read_text())
    # per-channel scales: per-tensor int8 loses too much here (mean cosine 0.934 vs 0.993 on
    # SciFact abstracts with all-MiniLM-L6-v2)
    quantize_dynamic(
        fp32_dir / MODEL_FILE, out / MODEL_FILE, weight_type=QuantType.QInt8, per_channel=True
    )
    shutil.copyfile(fp32_dir / TOKENIZER_FILE, out / TOKENIZER_FILE)
    manifest = {k: fp32_manifest[k] for k in ("inputs", "dim", "max_seq_length", "pad_id",
                                              "pad_token", "padding_side")}  # fmt: skip
    reference = _onnx_vectors(fp32_dir, fp32_manifest, PROBE_TEXTS, True)
    agreement = _agreement(_onnx_vectors(out, manifest, PROBE_TEXTS, True), reference)
    if agreement["mean_cosine"] < INT8_MIN_MEAN_COSINE:
        raise SystemExit(f"int8 quantization loses too much (mean cosine {agreement}); use onnx")
    exporter = "onnxruntime.quantization.quantize_dynamic(QInt8, per_channel)"
    return {**manifest, "agreement": {"reference": "onnx fp32", **agreement}, "exporter": exporter}


def write_manifest(out: Path, fields: dict, args: argparse.Namespace) -> None:
    manifest = {
        "format": MANIFEST_FORMAT,
        "model_id": args.model_id,
        "source_hash": args.source_hash,
        "variant": args.variant,
        **fields,
        "onnx_bytes": (out / MODEL_FILE).stat().st_size,
        "onnx_sha256": file_sha256(out / MODEL_FILE),
        "tokenizer_bytes": (out / TOKENIZER_FILE).stat().st_size,
        "tokenizer_sha256": file_sha256(out / TOKENIZER_FILE),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name in (MODEL_FILE, TOKENIZER_FILE):
        with (out / name).open("rb") as fh:
            os.fsync(fh.fileno())
    with (out / MANIFEST_FILE).open("w") as fh:
        json.dump(manifest, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())


def prepare(runtime: str) -> None:
    """Export the configured model for `runtime` into the configured cache, ahead of use."""
    from candlefire_pipeline.embedding.onnx_artifacts import ensure_onnx_model
    from candlefire_pipeline.embedding.onnx_embedder import ONNX_VARIANTS
    from candlefire_pipeline.settings import Settings

    settings = Settings.from_env()
    artifact = ensure_onnx_model(settings.model_id, ONNX_VARIANTS[runtime], settings.onnx_dir)
    state = "exported" if artifact.exported else "already exported"
    sys.stdout.write(f"{state}: {artifact.path} ({artifact.manifest['agreement']})\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prepare", action="store_true")
    parser.add_argument("--runtime", choices=("onnx", "onnx-int8"), default="onnx")
    parser.add_argument("--source", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--variant", choices=("fp32", "int8"))
    parser.add_argument("--fp32", type=Path, help="the verified fp32 export (int8 only)")
    parser.add_argument("--model-id")
    parser.add_argument("--source-hash")
    args = parser.parse_args(argv)
    if args.prepare:
        prepare(args.runtime)
        return
    args.out.mkdir(parents=True)
    if args.variant == "fp32":
        fields = export_fp32(args.source, args.out)
    else:
        fields = export_int8(args.fp32, args.out)
    write_manifest(args.out, fields, args)


if __name__ == "__main__":
    main()
