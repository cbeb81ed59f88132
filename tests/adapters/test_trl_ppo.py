"""TRL's PPO and RLOO scripts read as the trainers they run (`adapters/trl/trainers.py`,
`ppo.py`, `ppo_writer.py`): PPO's four models, HF generation, its batch and length keys and
release limits; RLOO's own config defaults; write-back in PPOConfig's own keys."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from oomless.adapters import HardwareFlags
from oomless.adapters.trl import trainers as TT
from oomless.adapters.trl.reader import import_path
from oomless.adapters.trl.writer import export_files, native_settings
from oomless.cli.main import app
from oomless.errors import InputError
from oomless.planner.plan import make_plan
from oomless.spec.load import parse_spec, resolve
from oomless.spec.run import RolloutEngine
from tests.adapters.native_helpers import fit_write

CORPUS = Path(__file__).resolve().parents[1] / "real_configs" / "trl" / "HEAD"
PPO_DOC = CORPUS / "docs" / "source" / "ppo_trainer.md.L19-32.sh"
RLOO_DOC = CORPUS / "docs" / "source" / "rloo_trainer.md.L562-574.sh"
RLOO_VLM = CORPUS / "examples" / "scripts" / "rloo_vlm.py.L48-61.sh"


def read(path: Path, **hw: Any) -> tuple[dict, list, list]:
    return import_path(path, HardwareFlags(**{"gpu": "A100-80GB", **hw}))


def write(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


PPO_CMD = """{directive}accelerate launch --num_processes 2 examples/scripts/ppo/ppo.py \\
    --model_name_or_path EleutherAI/pythia-1b-deduped \\
    --sft_model_path EleutherAI/pythia-1.4b-deduped \\
    --reward_model_path EleutherAI/pythia-160m \\
    --per_device_train_batch_size 8 --gradient_accumulation_steps 4 {extra}
"""


def ppo(tmp_path: Path, extra: str = "", directive: str = "") -> tuple[dict, list, list]:
    return read(write(tmp_path, PPO_CMD.format(extra=extra, directive=directive)))


def test_the_ppo_docs_command_reads_as_ppo_with_its_four_models() -> None:
    spec, _, notes = read(PPO_DOC, gpus_per_node=8)
    assert spec["algorithm"] == "ppo"
    assert spec["model"] == spec["critic"]["model"] == spec["reward_model"]["model"] == "EleutherAI/pythia-1b-deduped"
    assert spec["rollout"]["engine"] == "hf"
    assert spec["gradient_checkpointing"] is False  # PPOTrainer never enables it
    assert spec["lengths"]["max_completion_tokens"] == 53  # PPOConfig's response_length default
    assert spec["batch"] == {"micro_batch_size": 64, "gradient_accumulation_steps": 1, "num_generations": 1}
    assert any("TRL 1.12" in n for n in notes)  # the newest release with PPOTrainer


def test_policy_is_sft_model_path_and_value_and_reward_models_are_reward_model_path(tmp_path: Path) -> None:
    spec, ignored, _ = ppo(tmp_path)
    assert spec["model"] == "EleutherAI/pythia-1.4b-deduped"  # model_name_or_path is the tokenizer's
    assert spec["critic"] == {"model": "EleutherAI/pythia-160m", "wrapped_with_actor": True}
    assert spec["reward_model"] == {"model": "EleutherAI/pythia-160m"}
    assert spec["kl_beta"] == 0.05  # kl_coef's default
    assert spec["batch"]["logprob_micro_batch_size"] == 32  # min(local_rollout_forward_batch_size 64, 8 × 4)
    assert not any(line.startswith(("sft_model_path", "reward_model_path")) for line in ignored)


def test_the_ppo_plan_holds_four_models_and_trains_the_critic(tmp_path: Path) -> None:
    run = resolve(parse_spec(ppo(tmp_path)[0]))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    train = next(p for p in plan.devices[0].phases if p.name == "train")
    weights = {c.name: c.num_bytes for c in train.components if c.name.endswith(".weights")}
    for model in ("policy", "reference", "critic", "reward"):
        assert weights.get(f"{model}.weights", 0) > 0, model
    # the 160m reward model is planned as itself, not as the 1.4b policy
    assert weights["reward.weights"] * 4 < weights["policy.weights"]
    # one backward trains both (PolicyAndValueWrapper): the value model's activations in the train phase
    assert {p.name for p in plan.devices[0].phases} >= {"train", "logprob"} and "critic_train" not in {
        p.name for p in plan.devices[0].phases}
    assert next(c.num_bytes for c in train.components if c.name == "critic.activations") > 0


def test_ppo_tldr_keeps_prompts_of_512_tokens(tmp_path: Path) -> None:
    text = PPO_CMD.format(extra="", directive="").replace("ppo/ppo.py", "ppo/ppo_tldr.py")
    spec, _, _ = read(write(tmp_path, text))
    assert spec["lengths"]["max_prompt_tokens"] == 512
    spec, _, _ = read(write(tmp_path, "# oomless: max_prompt_tokens=100\n" + text))
    assert spec["lengths"]["max_prompt_tokens"] == 100


def test_ppo_keys_are_read_and_vllm_keys_are_not(tmp_path: Path) -> None:
    spec, ignored, _ = ppo(tmp_path, "--response_length 200 --kl_coef 0.1 --local_rollout_forward_batch_size 4 "
                                     "--gradient_checkpointing true --num_ppo_epochs 4 --use_vllm true")
    assert spec["lengths"]["max_completion_tokens"] == 200 and spec["kl_beta"] == 0.1
    assert spec["batch"]["logprob_micro_batch_size"] == 4
    assert spec["gradient_checkpointing"] is False
    assert any(line.startswith("gradient_checkpointing: PPOTrainer never enables it") for line in ignored)
    assert "num_ppo_epochs: no effect on memory" in ignored
    assert any(line.startswith("use_vllm:") for line in ignored)  # not a PPOConfig key


def test_ppo_with_lora_keeps_the_reference_forward_on_the_policy(tmp_path: Path) -> None:
    spec, _, _ = ppo(tmp_path, "--use_peft true --lora_r 8 --lora_target_modules query_key_value")
    assert spec["finetune"]["method"] == "lora"
    assert "recompute_old_logprobs" not in spec["rollout"]  # the adapter-off forward is the reference's
    full, _, _ = ppo(tmp_path)
    assert full["rollout"]["recompute_old_logprobs"] is False  # old log-probs are generate's scores


def test_examples_before_0_26_load_fp32_models_with_default_attention(tmp_path: Path) -> None:
    spec, ignored, _ = ppo(tmp_path, "--attn_implementation flash_attention_2", "# oomless: trl==0.20\n")
    assert "attention" not in spec
    assert any(line.startswith("attn_implementation: TRL 0.20's PPO example scripts do not pass it") for line in ignored)
    spec, _, _ = ppo(tmp_path, "--attn_implementation flash_attention_2", "# oomless: trl==0.26\n")
    assert spec["attention"] == "flash_attention_2"


@pytest.mark.parametrize(("extra", "directive", "field"), [
    ("--num_mini_batches 3", "", "num_mini_batches"),  # 8 × 4 rollouts per rank do not split in 3
    ("", "# oomless: trl==1.16\n", "trl version"),  # PPOTrainer is gone from 1.13
    ("", "# oomless: trl==0.18\n", "bf16"),  # PPOConfig defaults bf16 only from 0.19
    ("--sft_model_path no-such/model-xyz", "", "sft_model_path"),
])
def test_bad_ppo_input_is_one_error_naming_the_flag(tmp_path: Path, extra: str, directive: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        ppo(tmp_path, extra, directive)
    assert err.value.field == field
    path = write(tmp_path, PPO_CMD.format(extra=extra, directive=directive), "cli.sh")
    result = CliRunner().invoke(app, ["plan", "--from", "trl", str(path), "--gpu", "A100-80GB"])
    assert result.exit_code == 2
    assert field in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("script", "trainer"), [
    ("examples/scripts/ppo/ppo.py", "ppo"), ("ppo_tldr.py", "ppo"), ("run_ppo.py", "ppo"), ("dppo.py", "grpo"),
    ("examples/scripts/rloo_vlm.py", "rloo"), ("trl rloo", "rloo"), ("trl.scripts.rloo", "rloo"),
    ("trl grpo", "grpo"), ("grpo_vlm.py", "grpo"), ("", "grpo"),
])
def test_trainer_of_script(script: str, trainer: str) -> None:
    assert TT.trainer_of(script, None) == trainer


def test_rloo_commands_read_as_rloo_with_rloo_config_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CORPUS)  # the commands name their accelerate config from the repository root
    spec, _, _ = read(RLOO_VLM, gpus_per_node=8)
    assert spec["algorithm"] == "rloo"
    assert spec["kl_beta"] == 0.05  # RLOOConfig's beta (GRPOConfig's is 0.0 in 1.16)
    spec, _, _ = read(RLOO_DOC, gpus_per_node=8)
    assert spec["algorithm"] == "rloo" and spec["batch"]["num_generations"] == 2  # RLOOConfig's default


def test_rloo_ignores_grpo_only_keys_and_refuses_the_old_trainers_keys_in_a_new_release(tmp_path: Path) -> None:
    base = "accelerate launch --num_processes 2 examples/scripts/rloo.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct "
    spec, ignored, _ = read(write(tmp_path, base + "--padding_free true --num_generations 4"))
    assert "padding_free" not in spec["batch"]
    assert any(line.startswith("padding_free: not an RLOOConfig key") for line in ignored)
    with pytest.raises(InputError) as err:
        read(write(tmp_path, "# oomless: trl==1.16\n" + base + "--sft_model_path Qwen/Qwen2.5-0.5B-Instruct"))
    assert err.value.field == "sft_model_path"


def test_ppo_export_writes_only_ppo_config_keys_and_reads_back(tmp_path: Path) -> None:
    spec = parse_spec(ppo(tmp_path)[0])
    files = export_files(spec)  # raises unless the files read back as the spec
    table = TT.key_table(TT.PPO)
    settings = native_settings(spec)
    assert not [k for k in settings if not (table.exists_in(k, TT.PPO_LAST) or k in ("fp16", "optim",
                "per_device_train_batch_size", "gradient_accumulation_steps"))]
    assert "examples/scripts/ppo/ppo.py" in files["launch.sh"] and "vllm" not in files["launch.sh"]


def test_ppo_refuses_what_ppo_trainer_cannot_run(tmp_path: Path) -> None:
    spec = parse_spec(ppo(tmp_path)[0])
    for change in ({"rollout": spec.rollout.model_copy(update={"engine": RolloutEngine.vllm_colocate})},
                   {"gradient_checkpointing": True}):
        with pytest.raises(InputError):
            native_settings(spec.model_copy(update=change))


def test_fit_writes_the_ppo_docs_command_back_in_ppo_keys(tmp_path: Path) -> None:
    source = tmp_path / "src" / PPO_DOC.name
    source.parent.mkdir()
    shutil.copy(PPO_DOC, source)
    result = fit_write("trl", source, tmp_path / "out", "--gpu", "A100-80GB")
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out" / PPO_DOC.name)
    text = written.read_text() if written.exists() else source.read_text()
    assert "--use_vllm" not in text and "--vllm_" not in text
    back, _, _ = read(written if written.exists() else source)
    assert back["algorithm"] == "ppo"


def _kept_scores(spec: dict) -> int:
    run = resolve(parse_spec(spec))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    train = next(p for p in plan.devices[0].phases if p.name == "train")
    return next(c.num_bytes for c in train.components if c.name == "generate.scores")


def test_generates_scores_are_planned_and_the_rest_noted(tmp_path: Path) -> None:
    """generate's fp32 scores, kept through training (`rollout.keeps_generation_scores`): rollouts
    per rank × response_length × vocab × 4 B (hand-derived for pythia-1.4b, vocab 50,304)."""
    spec, _, notes = ppo(tmp_path, "--response_length 100")
    assert spec["rollout"]["keeps_generation_scores"] is True
    scores = 8 * 4 * 100 * 50304 * 4
    assert _kept_scores(spec) == scores
    longer, _, _ = ppo(tmp_path, "--response_length 200")
    assert _kept_scores(longer) == 2 * scores
    assert any("loaded in float32" in n for n in notes)
    _, _, bf16 = ppo(tmp_path, "--dtype bfloat16")
    assert not any("loaded in float32" in n for n in bf16)


def test_rloo_reads_the_deprecated_on_policy_names_as_the_new_ones(tmp_path: Path) -> None:
    text = ("# oomless: trl==0.23\naccelerate launch --num_processes 2 examples/scripts/rloo.py "
            "--model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --per_device_train_batch_size 4 "
            "--rloo_k 4 --num_generations 2 --kl_coef 0.2 --response_length 300\n")
    spec, _, notes = read(write(tmp_path, text))
    assert spec["batch"]["num_generations"] == 4  # the deprecated name wins in 0.22-0.24
    assert spec["kl_beta"] == 0.2 and spec["lengths"]["max_completion_tokens"] == 300
    assert any(line.startswith("rloo_k: read as num_generations") for line in notes)


def test_a_checkpoint_named_after_the_tokenizer_model_is_planned_as_it_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's ppo_tldr docs command names cleanrl checkpoints of pythia-1b-deduped that cannot be
    read offline: planned with model_name_or_path's architecture, each with a warning."""
    monkeypatch.chdir(CORPUS)
    spec, ignored, _ = read(CORPUS / "docs" / "source" / "ppo_trainer.md.L183-199.sh")
    assert spec["model"] == spec["critic"]["model"] == "EleutherAI/pythia-1b-deduped"
    assert spec["lengths"]["max_prompt_tokens"] == 512  # ppo_tldr.py's filter
    warned = [line for line in ignored if "whose name it holds" in line]
    assert [line.split(":")[0] for line in warned] == ["sft_model_path", "reward_model_path"]


def test_ppo_releases_come_from_the_key_table() -> None:
    """PPOConfig is in every TRL wheel read up to 1.12.0 and in none from 1.13.0; the reader's
    release bounds say the same."""
    table = TT.key_table(TT.PPO)
    releases = [tuple(int(x) for x in v.split(".")) for v in table.versions]
    with_ppo = [v for v in releases if table.exists_in("response_length", v)]
    assert with_ppo == [v for v in releases if v[:2] <= TT.PPO_LAST]
    assert with_ppo[0][:2] == TT.PPO_FIRST and with_ppo[-1][:2] == TT.PPO_LAST
    assert len(with_ppo) < len(releases)  # wheels after the last were read and have none


@pytest.mark.parametrize("release", ["0.20", "0.26", "1.0", "1.12"])
def test_ppo_defaults_follow_the_stated_release(tmp_path: Path, release: str) -> None:
    spec, _, _ = ppo(tmp_path, "", f"# oomless: trl=={release}\n")
    table = TT.key_table(TT.PPO)
    version = next(v for v in reversed(table.versions) if v.startswith(release + "."))
    assert spec["lengths"]["max_completion_tokens"] == table.default("response_length", version)
    assert spec["kl_beta"] == table.default("kl_coef", version)


OLD_RLOO = """{directive}accelerate launch --num_processes 2 examples/scripts/rloo/rloo.py \\
    --model_name_or_path EleutherAI/pythia-1b-deduped --sft_model_path EleutherAI/pythia-1b-deduped \\
    --reward_model_path EleutherAI/pythia-160m --per_device_train_batch_size 4 --gradient_accumulation_steps 2 \\
    --num_mini_batches 2 --rloo_k 4 {extra}
"""


def test_the_old_rloo_trainer_reads_like_ppo_without_a_value_model(tmp_path: Path) -> None:
    spec, ignored, notes = read(write(tmp_path, OLD_RLOO.format(directive="", extra="--use_peft true")))
    assert any("TRL 0.21" in n for n in notes)  # its keys name the old trainer's release
    assert spec["algorithm"] == "rloo" and "critic" not in spec
    assert spec["model"] == "EleutherAI/pythia-1b-deduped" and spec["reward_model"] == {"model": "EleutherAI/pythia-160m"}
    assert spec["rollout"] == {"engine": "hf", "keeps_generation_scores": True, "recompute_old_logprobs": False}
    assert spec["finetune"] == {"method": "full"}  # the example builds no PEFT model
    assert spec["batch"] == {"micro_batch_size": 4, "gradient_accumulation_steps": 2, "num_generations": 4,
                             "steps_per_generation": 4, "logprob_micro_batch_size": 16}  # 4 × 2 × 2 rollouts
    assert any(line.startswith("use_peft:") for line in ignored)
    run = resolve(parse_spec(spec))
    plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
    roles = {c.name.split(".")[0] for p in plan.devices[0].phases for c in p.components if c.name.endswith(".weights")}
    assert roles == {"policy", "reference", "reward"}
    with pytest.raises(InputError) as err:
        read(write(tmp_path, OLD_RLOO.format(directive="", extra="--rloo_k 3")))
    assert err.value.field == "rloo_k"  # 16 rollouts do not split into groups of 3


def test_old_rloo_and_old_ppo_files_are_patched_in_their_releases_keys(tmp_path: Path) -> None:
    from oomless.adapters.trl.writer import file_dialect

    text = OLD_RLOO.format(directive="# oomless: trl==0.21\n", extra="")
    assert file_dialect(text, "run.sh") == (0, 21)
    spec = parse_spec(read(write(tmp_path, text))[0])
    settings = native_settings(spec, (0, 21))
    assert settings["rloo_k"] == 4 and settings["num_mini_batches"] == 2 and "num_generations" not in settings
    assert not any(k.startswith(("use_vllm", "vllm_", "use_peft", "dtype")) for k in settings)
    ppo_text = PPO_CMD.format(extra="--dtype bfloat16", directive="# oomless: trl==0.20\n")
    assert file_dialect(ppo_text, "run.sh") == (0, 20)
    spec = parse_spec(read(write(tmp_path, ppo_text))[0])
    assert "dtype" not in native_settings(spec, (0, 20))  # the 0.20 example does not pass it on
    assert "dtype" in native_settings(spec, (1, 12))
    assert file_dialect(PPO_CMD.format(extra="", directive=""), "run.sh") == TT.PPO_LAST


def test_zero3_generation_gathers_the_value_model_with_the_policy(tmp_path: Path) -> None:
    spec = parse_spec(ppo(tmp_path, "--use_deepspeed true --zero_stage 3")[0])
    assert spec.critic.wrapped_with_actor and spec.distribution.strategy.value == "zero3"

    def gathered(s: Any) -> int:
        run = resolve(s)
        plan = make_plan(run.spec, run.arch, run.gpu, run.archs)
        rollout = next(p for p in plan.devices[0].phases if p.name == "rollout")
        return sum(c.num_bytes for c in rollout.components if c.name == "generate.gathered_weights")

    alone = spec.model_copy(update={"critic": spec.critic.model_copy(update={"wrapped_with_actor": False})})
    assert gathered(spec) > gathered(alone) > 0
