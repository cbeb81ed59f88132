#!/bin/bash
# openrlhf==0.10.1
# OpenRLHF 0.10.1 launch written by `oomless export --to openrlhf` for meta-llama/Llama-3.1-8B-Instruct.
# Add your dataset (--data.prompt_dataset / --prompt_data) and reward before training.
python3 -m openrlhf.cli.train_ppo_ray \
    --pretrain meta-llama/Llama-3.1-8B-Instruct \
    --colocate_all_models \
    --actor_num_nodes 1 \
    --actor_num_gpus_per_node 8 \
    --ref_num_nodes 1 \
    --ref_num_gpus_per_node 8 \
    --vllm_num_engines 4 \
    --vllm_tensor_parallel_size 2 \
    --vllm_gpu_memory_utilization 0.5 \
    --vllm_enable_sleep \
    --enforce_eager \
    --deepspeed_enable_sleep \
    --ref_reward_offload \
    --zero_stage 3 \
    --gradient_checkpointing \
    --attn_implementation flash_attention_2 \
    --param_dtype bf16 \
    --micro_train_batch_size 8 \
    --micro_rollout_batch_size 16 \
    --n_samples_per_prompt 8 \
    --max_len 3072 \
    --max_new_tokens 2048 \
    --init_kl_coef 0.001 \
    --advantage_estimator group_norm \
    --packing_samples \
    --train_batch_size 64 \
    --rollout_batch_size 8
