#!/usr/bin/env bash
# Seed case S0, after the fix (shared/cases/seed-cases.md; ms-swift issue 4311): it trained.
# vLLM tensor parallel 4 at 0.5, sleep level 1, model and optimizer offloaded during rollout,
# per-device batch 2, at most 2 images per prompt for vLLM.
# The native form of examples/seeds/s0-after.yaml; its comments give the assumptions.
#
# Plan it (the GPU type is not in the script):
#   oomless plan --from swift examples/seeds/native/s0-after.sh --gpu H20
#
# ms-swift 3.5 with vLLM 0.8.x: gc_collect_after_offload false (its default then), so PyTorch's
# cached blocks stay reserved while the engine wakes.
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
    --per_device_train_batch_size 2 \
    --gradient_accumulation_steps 4 \
    --num_generations 8 \
    --max_length 2048 \
    --max_completion_length 1024 \
    --use_vllm true \
    --vllm_mode colocate \
    --vllm_gpu_memory_utilization 0.5 \
    --vllm_tensor_parallel_size 4 \
    --vllm_limit_mm_per_prompt '{"image": 2}' \
    --sleep_level 1 \
    --offload_model true \
    --offload_optimizer true \
    --learning_rate 1e-6 \
    --output_dir output/s0-after
