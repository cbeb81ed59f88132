#!/bin/bash
# oomless plan --from vlmr1 examples/seeds/native/s3-before.sh --gpu H20
#
# Seed case S3 before the fix (VLM-R1 issue 81) as VLM-R1's own launch (run_scripts/ style):
# 6 × H20 (nproc_per_node 6), num_generations 4, per-device train batch 4 (prompts),
# gradient accumulation 1; CUDA OOM after 4 steps. The GPU type is not in the launch: it is
# given with --gpu. local_scripts/zero3.json is VLM-R1's ZeRO-3 config ("auto" sizes).
# max_completion_length and max_pixels are VLM-R1's defaults then (256, 12845056). The spec
# form with every assumption is examples/seeds/s3-before.yaml.
cd src/open-r1-multimodal

export DEBUG_MODE="true"
RUN_NAME="Qwen2.5-VL-3B-GRPO-REC"
export LOG_PATH="./debug_log_$RUN_NAME.txt"

torchrun --nproc_per_node="6" \
    --nnodes="1" \
    --node_rank="0" \
    --master_addr="127.0.0.1" \
    --master_port="12346" \
    src/open_r1/grpo_rec.py \
    --deepspeed local_scripts/zero3.json \
    --output_dir output/$RUN_NAME \
    --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct \
    --dataset_name data_config/rec.yaml \
    --image_root <your_image_root> \
    --max_prompt_length 1024 \
    --num_generations 4 \
    --per_device_train_batch_size 4 \
    --gradient_accumulation_steps 1 \
    --logging_steps 1 \
    --bf16 \
    --torch_dtype bfloat16 \
    --data_seed 42 \
    --report_to wandb \
    --gradient_checkpointing true \
    --attn_implementation flash_attention_2 \
    --num_train_epochs 2 \
    --run_name $RUN_NAME \
    --save_steps 100 \
    --save_only_model true
