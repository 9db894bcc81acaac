#!/usr/bin/env python3
"""An independent, standard-library-only implementation of the fallback awp-hash-384-v1.

usage: python3 make_hash_fixture.py <fixture dir>   (writes <fixture dir>/hash-384-v1.json)
It restates the scheme of docs/embeddings.md; the unit test checks the C++ vectors against it.
Words: NFKC + case folding, runs of letters (L*), decimal digits (Nd) and marks (M*); each CJK
ideograph is its own word. Features: "w:"+word (1.0), "p:"+word+" "+next (0.5), "c:"+each 3-5
character fragment of "<word>" (0.25); value = weight * (1 + ln tf); each feature is added with
sign and bucket from two hashes (seed 0, 1): FNV-1a 64 (offset basis xor seed) then the
splitmix64 finaliser; bucket = (h >> 1) % 384, sign = - if h & 1. Then L2 normalisation.
"""
import json
import math
import os
import sys
import unicodedata

MASK = (1 << 64) - 1
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def stable_hash(data: bytes, seed: int) -> int:
    h = 0xcbf29ce484222325 ^ seed
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & MASK
    h = (h + 0x9e3779b97f4a7c15) & MASK
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & MASK
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & MASK
    return h ^ (h >> 31)


def words(text):
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    out, word = [], ""
    for ch in folded:
        if any(lo <= ord(ch) <= hi for lo, hi in CJK):
            out += [w for w in (word, ch) if w]
            word = ""
        elif unicodedata.category(ch)[0] in "LM" or unicodedata.category(ch) == "Nd":
            word += ch
        elif word:
            out.append(word)
            word = ""
    return out + ([word] if word else [])


def embed(text):
    ws = words(text)
    features = {}

    def add(key, weight):
        features.setdefault(key, [weight, 0])[1] += 1

    for i, w in enumerate(ws):
        add("w:" + w, 1.0)
        if i + 1 < len(ws):
            add("p:" + w + " " + ws[i + 1], 0.5)
        framed = "<" + w + ">"
        for n in range(3, 6):
            for s in range(len(framed) - n + 1):
                add("c:" + framed[s:s + n], 0.25)
    if not features:
        add("e:", 1.0)
    v = [0.0] * 384
    for key in sorted(features, key=lambda k: k.encode()):
        weight, tf = features[key]
        value = weight * (1.0 + math.log(tf))
        for seed in (0, 1):
            h = stable_hash(key.encode(), seed)
            v[(h >> 1) % 384] += -value if h & 1 else value
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v], len(ws)


TEXTS = ["", "hello", "How do I reset my password?", "Password reset instructions",
         "Configure the PostgreSQL connection pool", "the the the cat", "Straße ｆｕｌｌ Café",
         "中文分词 and English", "a b c d e f g", "version 1.2.3 — naïve résumé"]

if __name__ == "__main__":
    rows = []
    for t in TEXTS:
        vec, n = embed(t)
        rows.append({"text": t, "words": n, "vector": [round(x, 9) for x in vec]})
    with open(os.path.join(sys.argv[1], "hash-384-v1.json"), "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False, separators=(",", ":"))
