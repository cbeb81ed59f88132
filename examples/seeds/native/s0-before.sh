#!/usr/bin/env bash
# Seed case S0, before the fix (shared/cases/seed-cases.md; ms-swift issue 4311): GRPO of
# Qwen2.5-VL-3B-Instruct, full fine-tuning including the vision tower, on 4 × H20 (96 GB),
# vLLM colocated with the trainer. Reported outcome: CUDA OOM.
# The native form of examples/seeds/s0-before.yaml; its comments give the assumptions.
#
# Plan it (the GPU type is not in the script):
#   oomless plan --from swift examples/seeds/native/s0-before.sh --gpu H20
#
# ms-swift 3.5 (May 2025) with vLLM 0.8.x: vllm_mode colocate at the default utilization 0.9,
# tensor parallel 1, no sleep, nothing offloaded; vllm_max_model_len unset (the model's 128000).
# oomless: ms-swift==3.5 vllm==0.8.5
CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=4 \
MAX_PIXELS=602112 \
swift rlhf \
    --rlhf_type grpo \
    --model Qwen/Qwen2.5-VL-3B-Instruct \
    --train_type full \
    --freeze_vit false \
    --torch_dtype bfloat16 \
    --dataset lmms-lab/multimodal-open-r1-8k-verified \
    --reward_funcs accuracy format \
    --deepspeed zero3 \
    --per_device_train_batch_size 8 \
    --gradient_accumulation_steps 4 \
    --num_generations 8 \
    --max_length 2048 \
    --max_completion_length 1024 \
    --use_vllm true \
    --vllm_mode colocate \
    --learning_rate 1e-6 \
    --output_dir output/s0-before
