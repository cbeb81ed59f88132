#!/usr/bin/env bash
# GRPO of Qwen/Qwen2-7B-Instruct with ms-swift, written by `oomless export --to swift`.
# Plan it: oomless plan --from swift run_grpo.sh --gpu RTX-3090
# Replace --dataset and --reward_funcs with yours; the memory settings are the spec's.
# oomless: ms-swift==3.4 vllm==0.8.5
set -euo pipefail

CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2-7B-Instruct \
    --dataset 'AI-MO/NuminaMath-TIR#1000' \
    --reward_funcs accuracy format \
    --train_type lora \
    --lora_rank 8 \
    --lora_alpha 32 \
    --lora_dropout 0.05 \
    --target_modules all-linear \
    --torch_dtype bfloat16 \
    --deepspeed zero2 \
    --optim adamw_torch \
    --gradient_checkpointing true \
    --attn_impl sdpa \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 8 \
    --num_generations 8 \
    --max_length 1024 \
    --max_completion_length 512 \
    --beta 0.04 \
    --use_vllm true \
    --num_infer_workers 1 \
    --vllm_device auto \
    --vllm_gpu_memory_utilization 0.8 \
    --vllm_max_model_len 32768 \
    --vllm_max_num_seqs 256
