"""What a patch of a user's ms-swift script can say beyond the writer's own mapping: the run
before the patch (`common.fallback_spec`) fixes what the script's other commands and its
release decide. Each check gives (spec field, why) or None; `writer` raises it."""

from __future__ import annotations

from ...spec.run import FinetuneMethod, RolloutEngine, RunSpec, Strategy
from . import keys as SF


def release_engine_problem(spec: RunSpec, profile: SF.Profile) -> tuple[str, str] | None:
    """Where a patch turns vLLM on in a script that generated with HF (`common.fallback_spec`),
    the engine is the release's (`layout.release_engine`, which `oomless fit --from` starts
    from: `cli.import_cmd.with_idle_engine`): its vLLM's CUDA graphs, its whole-model weight
    gather unless `--move_model_batches`, and 3.2-3.4's 256 sequences unless `--vllm_max_num_seqs`.
    Other values read back as another run (ms-swift 3.4's full_lmdeploy.sh planned with
    the spec's defaults: weight sync 10.45 GiB planned, 20.78 GiB as read back)."""
    from ..common import fallback_spec
    from ..patch import planned_max_num_seqs

    old, ro = fallback_spec(), spec.rollout
    if old is None or old.rollout.engine != RolloutEngine.hf:
        return None
    stated = old.rollout.model_fields_set
    graphs = old.rollout.cuda_graphs_in_budget if "cuda_graphs_in_budget" in stated else \
        profile.default_vllm >= SF.VLLM_GRAPHS_IN_BUDGET
    if ro.cuda_graphs_in_budget != graphs:
        return ("rollout.cuda_graphs_in_budget", f"{ro.cuda_graphs_in_budget} (the script's vLLM captures "
                f"CUDA graphs {'inside' if graphs else 'on top of'} the budget)")
    gathered = spec.distribution.strategy in (Strategy.zero3, Strategy.fsdp) and spec.finetune.method == FinetuneMethod.full
    if ro.weight_sync_batches is None and gathered:
        return ("rollout.weight_sync_batches", "a sync one parameter at a time (it gathers the whole model, "
                "or --move_model_batches N)")
    if not profile.has_vllm_mode and ro.max_num_seqs is None and planned_max_num_seqs(spec) != profile.default_max_num_seqs:
        return ("rollout.max_num_seqs", f"vLLM's default {planned_max_num_seqs(spec)} (its engine takes "
                f"{profile.default_max_num_seqs} sequences unless --vllm_max_num_seqs)")
    return None


SERVER_FIELDS = ("num_gpus", "gpu_memory_utilization", "tensor_parallel_size", "max_model_len", "max_num_seqs",
                 "enforce_eager", "limit_images_per_prompt", "cuda_graphs_in_budget")
"""Engine fields of a vLLM server: flags of its own `swift rollout` command, not of `swift rlhf`."""


def server_problem(spec: RunSpec, profile: SF.Profile) -> tuple[str, str] | None:
    """Where a patch of the user's script is written (`common.fallback_spec`: the run before
    it), a server engine must stay as the script runs it, and none is added or dropped: the
    patch edits the training command, and the server is another (`swift rollout`, or one the
    user starts elsewhere; tree_rollout.sh's would have stayed on GPU 0 under an engine
    colocated on GPUs 0 and 1)."""
    from ..common import fallback_spec

    old = fallback_spec()
    if old is None or not profile.has_vllm_mode:  # 3.2-3.4's engine on a spare GPU is swift rlhf's own
        return None
    was, now = (s.rollout.engine == RolloutEngine.vllm_separate for s in (old, spec))
    if not was and now:
        return ("rollout.engine", "a vLLM server in a patch of the training command (the server is a "
                "`swift rollout` command of its own)")
    if was and not now:
        return ("rollout.engine", f"{spec.rollout.engine.value} in a patch of the training command: the script's vLLM "
                "server (`swift rollout`, or one started elsewhere) keeps running on its GPUs")
    if not now:
        return None
    changed = [name for name in SERVER_FIELDS if getattr(spec.rollout, name) != getattr(old.rollout, name)]
    if changed:
        return (f"rollout.{changed[0]}", f"{getattr(spec.rollout, changed[0])!r} in a patch of the "
                "training command: the vLLM server's own `swift rollout` command sets it")
    return None
