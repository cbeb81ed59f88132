# An OpenRLHF >= 0.10.2 hybrid-engine GRPO launch (dotted flags; test input).
ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"working_dir": "/openrlhf"}' \
   -- python3 -m openrlhf.cli.train_ppo_ray \
   --ref.num_nodes 1 --ref.num_gpus_per_node 8 \
   --actor.num_nodes 1 --actor.num_gpus_per_node 8 \
   --vllm.num_engines 4 --vllm.tensor_parallel_size 2 \
   --train.colocate_all --vllm.gpu_memory_utilization 0.5 \
   --vllm.enable_sleep --ds.enable_sleep --ref.offload \
   --actor.model_name_or_path meta-llama/Llama-3.1-8B-Instruct \
   --ds.zero_stage 3 --ds.param_dtype bf16 --actor.gradient_checkpointing_enable \
   --train.micro_batch_size 8 --rollout.micro_batch_size 16 --rollout.n_samples_per_prompt 8 \
   --data.max_len 3072 --rollout.max_new_tokens 2048 \
   --algo.advantage.estimator group_norm --algo.kl.init_coef 1e-3 --algo.kl.use_loss \
   --ds.packing_samples --vllm.enforce_eager --logger.wandb.key abc --train.batch_size 128
