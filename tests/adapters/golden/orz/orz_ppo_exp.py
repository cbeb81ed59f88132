# orz==0.1.0
# Open-Reasoner-Zero experiment config written by `oomless export --to orz` for Qwen/Qwen2.5-1.5B-Instruct.
# Put it in playground/ and run `python -m playground.<name>`; add prompt_data and the reward before training.
import asyncio
from dataclasses import dataclass
from typing import Optional

from orz.exps.examples.ppo.ppo_base_exp import BasePPOExpConfig
from playground.orz_7b_ppo import PPOExp


@dataclass
class PPOExpConfig(BasePPOExpConfig):
    colocate_all: bool = True
    actor_num_nodes: int = 4
    actor_num_gpus_per_node: int = 1
    ref_num_nodes: int = 4
    ref_num_gpus_per_node: int = 1
    critic_num_nodes: int = 4
    critic_num_gpus_per_node: int = 1
    colocate_actor_ref: bool = True
    colocate_critic_reward: bool = False
    vllm_num_engines: int = 4
    vllm_tensor_parallel_size: int = 1
    pretrain: Optional[str] = 'Qwen/Qwen2.5-1.5B-Instruct'
    critic_pretrain: Optional[str] = 'Qwen/Qwen2.5-1.5B-Instruct'
    reward_pretrain: Optional[str] = None
    use_grpo: bool = False
    zero_stage: int = 3
    adam_offload: bool = False
    bf16: bool = True
    flash_attn: bool = True
    gradient_checkpointing: bool = True
    gpu_memory_utilization: float = 0.85
    max_num_batched_tokens: int = 2048
    enforce_eager: bool = False
    prompt_max_len: int = 512
    generate_max_len: int = 512
    max_len: Optional[int] = None
    micro_train_batch_size: int = 8
    micro_forward_batch_size: int = 2
    n_samples_per_prompt: int = 1
    init_kl_coef: float = 0.01


if __name__ == "__main__":
    exp = PPOExp().set_cfg(PPOExpConfig())
    asyncio.run(exp.run())
