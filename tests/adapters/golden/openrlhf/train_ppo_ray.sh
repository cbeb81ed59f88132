#!/bin/bash
# openrlhf==0.11.2
# OpenRLHF 0.11.2 launch written by `oomless export --to openrlhf` for meta-llama/Llama-3.1-8B-Instruct.
# Add your dataset (--data.prompt_dataset / --prompt_data) and reward before training.
python3 -m openrlhf.cli.train_ppo_ray \
    --actor.model_name_or_path meta-llama/Llama-3.1-8B-Instruct \
    --train.colocate_all \
    --actor.num_nodes 1 \
    --actor.num_gpus_per_node 8 \
    --ref.num_nodes 1 \
    --ref.num_gpus_per_node 8 \
    --vllm.num_engines 4 \
    --vllm.tensor_parallel_size 2 \
    --vllm.gpu_memory_utilization 0.5 \
    --vllm.enable_sleep \
    --vllm.enforce_eager \
    --ds.enable_sleep \
    --ref.offload \
    --reward.offload \
    --ds.zero_stage 3 \
    --actor.gradient_checkpointing_enable \
    --ds.attn_implementation flash_attention_2 \
    --ds.param_dtype bf16 \
    --train.micro_batch_size 8 \
    --rollout.micro_batch_size 16 \
    --rollout.n_samples_per_prompt 8 \
    --data.max_len 3072 \
    --rollout.max_new_tokens 2048 \
    --algo.kl.init_coef 0.001 \
    --algo.advantage.estimator group_norm \
    --ds.packing_samples \
    --train.batch_size 64 \
    --rollout.batch_size 8
