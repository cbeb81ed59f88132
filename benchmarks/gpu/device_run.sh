#!/usr/bin/env bash
# One call on a lent GPU machine (the `device` tool): the machine has torch, accelerate, pyarrow,
# huggingface_hub and nvidia-ml-py but not oomless's other dependencies, TRL or vLLM, and reaches no
# index, so the wheels travel in `.whl/` (git-ignored; how they were fetched is in benchmarks/README.md).
# Runs the harness and leaves gpu-phases.json/.md and the runs' logs and telemetry (no weights) in $OUT.
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
python3 benchmarks/gpu/grpo_phases.py --out /tmp/gpu --steps "${STEPS:-2}" --timeout "${PER_MODEL_S:-240}" "$@"
rc=$?
cp /tmp/gpu/gpu-phases.json /tmp/gpu/gpu-phases.md "$out"/ 2>/dev/null
tar czf "$out/runs.tgz" -C /tmp/gpu --exclude=model --exclude=final --exclude='checkpoint-*' --exclude='*.safetensors' .
exit $rc
