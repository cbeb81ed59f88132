# The same launch in OpenRLHF <= 0.10.1 classic flags (test input).
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref_num_nodes 1 --ref_num_gpus_per_node 8 \
   --actor_num_nodes 1 --actor_num_gpus_per_node 8 \
   --vllm_num_engines 4 --vllm_tensor_parallel_size 2 \
   --colocate_all_models --vllm_gpu_memory_utilization 0.5 \
   --vllm_enable_sleep --deepspeed_enable_sleep --ref_reward_offload \
   --pretrain meta-llama/Llama-3.1-8B-Instruct \
   --zero_stage 3 --param_dtype bf16 --gradient_checkpointing \
   --micro_train_batch_size 8 --micro_rollout_batch_size 16 --n_samples_per_prompt 8 \
   --max_len 3072 --max_new_tokens 2048 \
   --advantage_estimator group_norm --init_kl_coef 1e-3 --use_kl_loss \
   --packing_samples --enforce_eager --use_wandb abc --train_batch_size 128
