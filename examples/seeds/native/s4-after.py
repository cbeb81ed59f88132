# oomless plan --from orz examples/seeds/native/s4-after.py --gpu A100-80GB
"""Seed case S4 after the fix (Open-Reasoner-Zero issue 24) as an ORZ playground script.

PPO of Qwen2.5-1.5B-Instruct with actor, critic, reference and one vLLM engine per GPU
colocated on 4 × A100-80GB (colocate_all), ZeRO-3, bf16, rollout batch 2, micro rollout batch 2,
sequences of 1024 tokens (512 prompt + 512 generated). The GPU type is not in an ORZ config:
it is given with --gpu; ORZ's four 1-GPU "nodes" are planned as one node of 4 GPUs. oomless
reads this file with `ast` and never runs it. The spec form with every assumption is
examples/seeds/s4-after.yaml.
"""

import asyncio
import os
from dataclasses import dataclass
from typing import Optional

from loguru import logger

from orz.exps.examples.ppo.ppo_base_exp import BasePPOExpConfig
from playground.orz_7b_ppo import PPOExp

DEBUG_MODE = False if os.environ.get("DEBUG_MODE", "False") == "False" else True  # Global debug flag

file_name = f"{'debug_' if DEBUG_MODE else ''}{os.path.splitext(os.path.basename(__file__))[0]}"


@dataclass
class PPOExpConfig(BasePPOExpConfig):
    use_compute_reward_fn: bool = True
    use_orm_score: bool = False

    total_num_nodes: int = 4

    # resource related settings
    ref_num_nodes: int = total_num_nodes
    ref_num_gpus_per_node: int = 1
    actor_num_nodes: int = total_num_nodes
    actor_num_gpus_per_node: int = 1
    critic_num_nodes: int = total_num_nodes
    critic_num_gpus_per_node: int = 1
    colocate_all: bool = True
    colocate_critic_reward: bool = True
    colocate_actor_ref: bool = True
    vllm_num_engines: int = total_num_nodes
    vllm_tensor_parallel_size: int = 1
    adam_offload: bool = False
    zero_stage: int = 3

    # path related settings
    pretrain: Optional[str] = "Qwen/Qwen2.5-1.5B-Instruct"
    reward_pretrain: Optional[str] = None
    save_interval: int = 50
    ckpt_path: str = f"orz_ckpt/{file_name}"
    save_path: str = f"orz_ckpt/{file_name}"
    tensorboard_log_dir: str = f"orz_logs/{file_name}"

    # ppo related settings
    prompt_max_len: int = 512
    generate_max_len: int = 512
    rollout_batch_size: int = 2
    micro_rollout_batch_size: int = 2
    micro_forward_batch_size: int = 2
    n_samples_per_prompt: int = 1

    # generate related settings
    gpu_memory_utilization: float = 0.5  # the fix
    critic_pretrain: Optional[str] = pretrain


if __name__ == "__main__":
    exp = PPOExp().set_cfg(PPOExpConfig())
    logger.info(exp.get_cfg_as_str(exp.cfg))
    asyncio.run(exp.run())
