#!/usr/bin/env bash
# Seed case S1, before the fix (shared/cases/seed-cases.md): ms-swift GRPO of Qwen2-7B-Instruct
# with LoRA on 4 × RTX 3090 (24 GB). Reported outcome: CUDA OOM "even at the smallest batch".
# The native form of examples/seeds/s1-before.yaml; its comments give the assumptions.
#
# Plan it (the GPU type is not in the script):
#   oomless plan --from swift examples/seeds/native/s1-before.sh --gpu RTX-3090
#
# ms-swift 3.2-3.4 era: one vLLM engine (num_infer_workers 1) on the last visible GPU
# (vllm_device auto), which training rank 3 also uses. max_length 1024 = 512 prompt + 512
# completion tokens (lengths were not reported).
# oomless: ms-swift==3.4 vllm==0.8.5
CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2-7B-Instruct \
    --train_type lora \
    --lora_rank 8 \
    --lora_alpha 32 \
    --torch_dtype bfloat16 \
    --dataset AI-MO/NuminaMath-TIR#1000 \
    --reward_funcs accuracy format \
    --deepspeed zero2 \
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 8 \
    --num_generations 8 \
    --max_length 1024 \
    --max_completion_length 512 \
    --use_vllm true \
    --vllm_gpu_memory_utilization 0.8 \
    --num_infer_workers 1 \
    --vllm_device auto \
    --learning_rate 1e-6 \
    --output_dir output/s1-before
