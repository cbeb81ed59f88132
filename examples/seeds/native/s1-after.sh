#!/usr/bin/env bash
# Seed case S1, after the fix (shared/cases/seed-cases.md): it trained, slowly. Three training
# processes on A10 24 GB cards, ZeRO-3, LoRA rank 16, per-device batch 7, vLLM at 0.9.
# The native form of examples/seeds/s1-after.yaml; its comments give the assumptions.
#
# Plan it (the GPU type is not in the script):
#   oomless plan --from swift examples/seeds/native/s1-after.sh --gpu A10
#
# ms-swift 3.2-3.4 era: NPROC_PER_NODE=3 on 4 visible GPUs leaves the last one, where the engine
# goes (vllm_device auto), to vLLM alone. num_generations 7: the global batch 3 × 7 = 21 must
# divide by it.
# oomless: ms-swift==3.4 vllm==0.8.5
CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=3 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2-7B-Instruct \
    --train_type lora \
    --lora_rank 16 \
    --lora_alpha 32 \
    --torch_dtype bfloat16 \
    --dataset AI-MO/NuminaMath-TIR#1000 \
    --reward_funcs accuracy format \
    --deepspeed zero3 \
    --per_device_train_batch_size 7 \
    --gradient_accumulation_steps 8 \
    --num_generations 7 \
    --max_length 1024 \
    --max_completion_length 512 \
    --use_vllm true \
    --vllm_gpu_memory_utilization 0.9 \
    --num_infer_workers 1 \
    --vllm_device auto \
    --learning_rate 1e-6 \
    --output_dir output/s1-after
