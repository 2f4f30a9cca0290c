#!/usr/bin/env bash
# The GPU check on a lent GPU machine (or, with DEVICE=cpu SHAPE=tiny, its rehearsal here).
# Usage: bash bench/gpu_check.sh OUT_DIR   (make gpu-check GPU_CHECK_OUT=DIR calls it)
# Where the kit is not installed (the lent machine: its own python3 with a CUDA torch), the
# wheels of .gpu/ (make gpu-wheels) are unpacked under /tmp first and put on PYTHONPATH. The
# results are OUT_DIR/gpucheck.json, a log per step, and OUT_DIR/gpucheck.tar.gz of them all;
# the data, models and runs go to GPU_CHECK_WORK (default /tmp/gpucheck-work), not OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/gpu_check.sh OUT_DIR}"
python="${GPU_PYTHON:-python3}"
official_python="$python"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONUNBUFFERED=1
if ! "$python" -c "import importlib.metadata as m; m.version('pfl-docvqa-kit')" 2>/dev/null; then
    [ -d .gpu/wheels ] || { echo "the kit is not importable and .gpu/wheels is missing: make gpu-wheels"; exit 2; }
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu-site .gpu/wheels/*.whl
    export PYTHONPATH="/tmp/gpu-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
official=()
if [ -d .gpu/official-wheels ] && [ -d .gpu/official-code ]; then
    site="${GPU_OFFICIAL_SITE:-/tmp/gpu-official-site}"
    if [ -n "${GPU_OFFICIAL_PYTHON:-}" ]; then
        official_python="$GPU_OFFICIAL_PYTHON"
        site="$("$official_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
        official=(--official-site "$site" --official-code .gpu/official-code --official-python "$official_python")
    elif "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target "$site" .gpu/official-wheels/*.whl 2>/dev/null; then
        official=(--official-site "$site" --official-code .gpu/official-code --official-python "$official_python")
    else
        echo "the official wheels do not install with $python (they are the GPU machine's" \
             "Python 3.12 wheels; set GPU_OFFICIAL_PYTHON): the official side is skipped"
    fi
fi
mkdir -p "$out"
set +e
"$python" -m bench.gpucheck --out "$out" --work "${GPU_CHECK_WORK:-/tmp/gpucheck-work}" \
    --device "${DEVICE:-cuda}" --shape "${SHAPE:-vt5-base}" --budget "${GPU_CHECK_BUDGET:-500}" \
    "${official[@]}" ${GPU_CHECK_ARGS:-} 2>&1 | tee "$out/gpucheck.log"
status=${PIPESTATUS[0]}
set -e
tar -czf "$out.tar.gz.partial" -C "$out" . && mv "$out.tar.gz.partial" "$out/gpucheck.tar.gz"  # written beside $out: tar reads a folder that does not change
exit "$status"
