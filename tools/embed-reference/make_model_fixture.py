#!/usr/bin/python3
"""Writes the random BERT model folders of the awp::embed tests and torch's expected outputs.

usage: /usr/bin/python3 make_model_fixture.py <fixture dir> <work dir>
Needs Debian's python3-torch (1.13 on bookworm). Reads <work dir>/tiny-ids.json (token ids that
Hugging Face's tokenizers gave for the forward texts) and the tiny vocabulary written by
make_tokenizer_fixture.mjs. The encoder is built only from torch.nn parts (nn.Embedding,
nn.LayerNorm, nn.TransformerEncoder with post-LN, erf GELU), never from our code; its parameters
are saved under Hugging Face's BERT names in a hand-written safetensors file.
"""
import json
import math
import os
import shutil
import struct
import sys

import torch
from torch import nn

FIXTURES, WORK = sys.argv[1], sys.argv[2]
TEXTS = json.load(open(os.path.join(WORK, "tiny-ids.json"), encoding="utf-8"))
VOCAB_SIZE = sum(1 for _ in open(os.path.join(FIXTURES, "tiny-vocab.txt"), encoding="utf-8"))
H, LAYERS, HEADS, FFN, MAX_POS, TYPES = 48, 2, 3, 192, 64, 2
EPS = 1e-12


class RefBert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word = nn.Embedding(VOCAB_SIZE, H)
        self.pos = nn.Embedding(MAX_POS, H)
        self.types = nn.Embedding(TYPES, H)
        self.norm = nn.LayerNorm(H, eps=EPS)
        layer = nn.TransformerEncoderLayer(d_model=H, nhead=HEADS, dim_feedforward=FFN, dropout=0.0,
                                           activation="gelu", layer_norm_eps=EPS, batch_first=True,
                                           norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, ids, mask):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.word(ids) + self.pos(positions) + self.types(torch.zeros_like(ids))
        return self.encoder(self.norm(x), src_key_padding_mask=~mask)


def randomise(model, generator):
    # TransformerEncoder deep-copies one layer, so every parameter is redrawn; LayerNorm gains stay near 1.
    for name, p in model.named_parameters():
        with torch.no_grad():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))


def hf_tensors(model, prefix):
    """The model's parameters under Hugging Face BERT names (the MiniLM/bge layout)."""
    t = {}
    e = prefix + "embeddings."
    t[e + "word_embeddings.weight"] = model.word.weight
    t[e + "position_embeddings.weight"] = model.pos.weight
    t[e + "token_type_embeddings.weight"] = model.types.weight
    t[e + "LayerNorm.weight"] = model.norm.weight
    t[e + "LayerNorm.bias"] = model.norm.bias
    for i, layer in enumerate(model.encoder.layers):
        p = f"{prefix}encoder.layer.{i}."
        w, b = layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias
        for k, part in enumerate(["query", "key", "value"]):
            t[p + f"attention.self.{part}.weight"] = w[k * H:(k + 1) * H]
            t[p + f"attention.self.{part}.bias"] = b[k * H:(k + 1) * H]
        t[p + "attention.output.dense.weight"] = layer.self_attn.out_proj.weight
        t[p + "attention.output.dense.bias"] = layer.self_attn.out_proj.bias
        t[p + "attention.output.LayerNorm.weight"] = layer.norm1.weight
        t[p + "attention.output.LayerNorm.bias"] = layer.norm1.bias
        t[p + "intermediate.dense.weight"] = layer.linear1.weight
        t[p + "intermediate.dense.bias"] = layer.linear1.bias
        t[p + "output.dense.weight"] = layer.linear2.weight
        t[p + "output.dense.bias"] = layer.linear2.bias
        t[p + "output.LayerNorm.weight"] = layer.norm2.weight
        t[p + "output.LayerNorm.bias"] = layer.norm2.bias
    return t


def write_safetensors(path, tensors, dtype):
    """The safetensors format: u64 LE header length, JSON header, raw little-endian data."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, tensor in tensors.items():
        raw = tensor.detach().to(dtype).contiguous().numpy().tobytes()
        header[name] = {"dtype": {torch.float32: "F32", torch.float16: "F16"}[dtype],
                        "shape": list(tensor.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def write_folder(folder, model, *, prefix, dtype, pooling, max_seq_length, vocab_as):
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    tensors = hf_tensors(model, prefix)
    if prefix:  # a checkpoint saved from BertModel with a pooler head: the loader must ignore it
        tensors[prefix + "pooler.dense.weight"] = torch.zeros(H, H)
        tensors[prefix + "pooler.dense.bias"] = torch.zeros(H)
    write_safetensors(os.path.join(folder, "model.safetensors"), tensors, dtype)
    config = {"_name_or_path": f"awp-test/{os.path.basename(folder)}", "architectures": ["BertModel"],
              "model_type": "bert", "vocab_size": VOCAB_SIZE, "hidden_size": H,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": FFN,
              "max_position_embeddings": MAX_POS, "type_vocab_size": TYPES, "layer_norm_eps": EPS,
              "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
              "pad_token_id": 0, "torch_dtype": "float32" if dtype == torch.float32 else "float16"}
    json.dump(config, open(os.path.join(folder, "config.json"), "w"), indent=2)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    json.dump(modules, open(os.path.join(folder, "modules.json"), "w"), indent=2)
    json.dump({"word_embedding_dimension": H, "pooling_mode_cls_token": pooling == "cls",
               "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False},
              open(os.path.join(folder, "1_Pooling", "config.json"), "w"), indent=2)
    if max_seq_length:
        json.dump({"max_seq_length": max_seq_length, "do_lower_case": False},
                  open(os.path.join(folder, "sentence_bert_config.json"), "w"), indent=2)
    if vocab_as == "vocab.txt":
        shutil.copy(os.path.join(FIXTURES, "tiny-vocab.txt"), os.path.join(folder, "vocab.txt"))
    else:
        shutil.copy(os.path.join(FIXTURES, "tiny-tokenizer.json"), os.path.join(folder, "tokenizer.json"))


def truncate(ids, max_tokens):
    # Hugging Face truncation keeps [CLS], the first max_tokens - 2 tokens and [SEP].
    return ids if len(ids) <= max_tokens else ids[:max_tokens - 1] + ids[-1:]


def reference(model, pooling, max_tokens):
    """One padded batch through torch in float64: per text the ids, the pooled L2-normalised vector,
    and the first two texts' last hidden states."""
    model = model.double().eval()
    seqs = [truncate(t["ids"], max_tokens) for t in TEXTS]
    width = max(len(s) for s in seqs)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs]).bool()
    with torch.no_grad():
        hidden = model(ids, mask)
    out = []
    for i, s in enumerate(seqs):
        h = hidden[i, :len(s)]
        pooled = h[0] if pooling == "cls" else h.mean(dim=0)
        pooled = pooled / pooled.norm()
        row = {"text": TEXTS[i]["text"], "ids": s, "truncated": len(s) < len(TEXTS[i]["ids"]),
               "pooled": [round(float(x), 9) for x in pooled]}
        if i < 2:
            row["hidden"] = [[round(float(x), 9) for x in r] for r in h]
        out.append(row)
    return out


def make(name, seed, *, prefix, dtype, pooling, max_seq_length, vocab_as):
    generator = torch.Generator().manual_seed(seed)
    model = RefBert()
    randomise(model, generator)
    if dtype == torch.float16:  # the reference runs on exactly the weights the file holds
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    folder = os.path.join(FIXTURES, name)
    write_folder(folder, model, prefix=prefix, dtype=dtype, pooling=pooling,
                 max_seq_length=max_seq_length, vocab_as=vocab_as)
    expected = {"pooling": pooling, "max_tokens": max_seq_length or MAX_POS,
                "texts": reference(model, pooling, max_seq_length or MAX_POS)}
    json.dump(expected, open(os.path.join(FIXTURES, name + ".expected.json"), "w"),
              separators=(",", ":"))
    print(f"{name}: {os.path.getsize(os.path.join(folder, 'model.safetensors'))} bytes of weights")


torch.manual_seed(0)
make("tiny-bert-cls", 11, prefix="bert.", dtype=torch.float32, pooling="cls", max_seq_length=None,
     vocab_as="vocab.txt")
make("tiny-bert-mean-f16", 12, prefix="", dtype=torch.float16, pooling="mean", max_seq_length=24,
     vocab_as="tokenizer.json")
