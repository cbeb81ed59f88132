#!/usr/bin/env bash
# One call on a lent GPU machine (the `device` tool): the machine has torch, accelerate, pyarrow,
# huggingface_hub and nvidia-ml-py but not oomless's other dependencies, TRL or vLLM, and reaches no
# index, so the wheels travel in `.whl/` (git-ignored; how they were fetched is in benchmarks/README.md).
# Runs the harness and leaves gpu-phases.json/.md and the runs' logs and telemetry (no weights) in $OUT.
# RUNS (optional): several harness runs in one call, separated by ';', each "NAME HARNESS-ARGS...";
# each leaves its files in $OUT/NAME (e.g. RUNS="gpu-qlora --method qlora --optimizer adamw_8bit").
# Without RUNS: one run with this script's arguments, its files in $OUT itself.
# First of all, before anything initialises CUDA, NVML's used MiB (the driver's own reservation):
# kept in $OUT/nvml-used-before-cuda.txt and, through NVML_USED_BEFORE_CUDA_MIB, in the harness's environment.
set -u
NVML_USED_BEFORE_CUDA_MIB="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n 1)"
export NVML_USED_BEFORE_CUDA_MIB
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH="$PWD/src:/tmp/site" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
out="${OUT:-/tmp/gpu-out}"
mkdir -p "$out"
echo "$NVML_USED_BEFORE_CUDA_MIB" > "$out/nvml-used-before-cuda.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers, trl, datasets, pyarrow, pydantic, oomless.cli.main; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__, 'pyarrow', pyarrow.__version__)" || exit 4

harness() {  # harness NAME DEST ARGS...: one harness run in /tmp/NAME, its files copied to DEST
    local name="$1" dest="$2"
    shift 2
    mkdir -p "$dest"
    python3 benchmarks/gpu/grpo_phases.py --out "/tmp/$name" --steps "${STEPS:-2}" --timeout "${PER_MODEL_S:-240}" "$@"
    local rc=$?
    cp "/tmp/$name/gpu-phases.json" "/tmp/$name/gpu-phases.md" "$dest"/ 2>/dev/null
    tar czf "$dest/runs.tgz" -C "/tmp/$name" --exclude=model --exclude=final --exclude='checkpoint-*' --exclude='*.safetensors' .
    return $rc
}

if [ -z "${RUNS:-}" ]; then
    harness gpu "$out" "$@"
    exit $?
fi
status=0
IFS=';' read -ra runs <<< "$RUNS"
for run in "${runs[@]}"; do
    read -ra words <<< "$run"
    [ "${#words[@]}" -gt 0 ] || continue
    harness "${words[0]}" "$out/${words[0]}" "${words[@]:1}" || status=$?
done
exit $status
