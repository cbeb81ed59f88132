#!/usr/bin/env bash
# GRPO of Qwen/Qwen2.5-1.5B-Instruct with ms-swift, written by `oomless export --to swift`.
# Plan it: oomless plan --from swift run_grpo.sh --gpu A100-80GB --host-ram 512
# Replace --dataset and --reward_funcs with yours; the memory settings are the spec's.
# oomless: ms-swift==4.6
set -euo pipefail

CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2.5-1.5B-Instruct \
    --dataset 'AI-MO/NuminaMath-TIR#1000' \
    --reward_funcs accuracy format \
    --tuner_type full \
    --torch_dtype bfloat16 \
    --deepspeed ds_config.json \
    --gradient_checkpointing true \
    --attn_impl sdpa \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 4 \
    --num_generations 8 \
    --max_length 1024 \
    --max_completion_length 1024 \
    --beta 0.04 \
    --use_vllm true \
    --vllm_mode colocate \
    --vllm_gpu_memory_utilization 0.4 \
    --vllm_tensor_parallel_size 1 \
    --vllm_max_model_len 2048 \
    --vllm_max_num_seqs 16 \
    --sleep_level 1
