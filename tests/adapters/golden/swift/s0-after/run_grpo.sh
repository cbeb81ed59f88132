#!/usr/bin/env bash
# GRPO of Qwen/Qwen2.5-VL-3B-Instruct with ms-swift, written by `oomless export --to swift`.
# Plan it: oomless plan --from swift run_grpo.sh --gpu H20
# Replace --dataset and --reward_funcs with yours; the memory settings are the spec's.
# oomless: ms-swift==3.6 vllm==0.8.5
set -euo pipefail

CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
MAX_PIXELS=602112 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2.5-VL-3B-Instruct \
    --dataset 'AI-MO/NuminaMath-TIR#1000' \
    --reward_funcs accuracy format \
    --train_type full \
    --torch_dtype bfloat16 \
    --deepspeed zero3 \
    --optim adamw_torch \
    --gradient_checkpointing true \
    --attn_impl sdpa \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 4 \
    --num_generations 8 \
    --max_length 2048 \
    --max_completion_length 1024 \
    --beta 0.04 \
    --freeze_vit false \
    --use_vllm true \
    --vllm_mode colocate \
    --vllm_gpu_memory_utilization 0.5 \
    --vllm_tensor_parallel_size 4 \
    --vllm_max_model_len 128000 \
    --vllm_limit_mm_per_prompt '{"image": 2}' \
    --sleep_level 1 \
    --offload_model true \
    --offload_optimizer true
