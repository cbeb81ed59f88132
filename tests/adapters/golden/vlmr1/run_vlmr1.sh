#!/bin/bash
# VLM-R1 launch written by `oomless export --to vlmr1` for Qwen/Qwen2.5-VL-3B-Instruct.
# Run from src/open-r1-multimodal; add --dataset_name/--image_root and --output_dir.
cd "$(dirname "$0")"
torchrun --nproc_per_node=6 --nnodes=1 src/open_r1/grpo_jsonl.py \
    --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 1 \
    --num_generations 4 \
    --max_prompt_length 1024 \
    --max_completion_length 256 \
    --max_pixels 12845056 \
    --beta 0.04 \
    --gradient_checkpointing true \
    --attn_implementation flash_attention_2 \
    --freeze_vision_modules false \
    --bf16 true \
    --deepspeed zero3.json
