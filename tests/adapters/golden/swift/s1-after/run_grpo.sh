#!/usr/bin/env bash
# GRPO of Qwen/Qwen2-7B-Instruct with ms-swift, written by `oomless export --to swift`.
# Plan it: oomless plan --from swift run_grpo.sh --gpu A10
# Replace --dataset and --reward_funcs with yours; the memory settings are the spec's.
# oomless: ms-swift==4.6 vllm==0.8.5
set -euo pipefail

# The vLLM server on GPU(s) 3; training waits for it.
CUDA_VISIBLE_DEVICES=3 \
swift rollout \
    --model Qwen/Qwen2-7B-Instruct \
    --vllm_gpu_memory_utilization 0.9 \
    --vllm_tensor_parallel_size 1 \
    --vllm_max_model_len 32768 \
    --vllm_max_num_seqs 256 &
sleep 120

CUDA_VISIBLE_DEVICES=0,1,2 \
NPROC_PER_NODE=3 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2-7B-Instruct \
    --dataset 'AI-MO/NuminaMath-TIR#1000' \
    --reward_funcs accuracy format \
    --tuner_type lora \
    --lora_rank 16 \
    --lora_alpha 32 \
    --lora_dropout 0.05 \
    --target_modules all-linear \
    --torch_dtype bfloat16 \
    --deepspeed ds_config.json \
    --optim adamw_torch \
    --gradient_checkpointing true \
    --attn_impl sdpa \
    --per_device_train_batch_size 7 \
    --gradient_accumulation_steps 8 \
    --num_generations 7 \
    --max_length 1024 \
    --max_completion_length 512 \
    --beta 0.04 \
    --use_vllm true \
    --vllm_mode server \
    --vllm_server_host 127.0.0.1 \
    --vllm_server_port 8000
