"""Open-Reasoner-Zero adapter: the playground config read with `ast` (never run), native S4,
export as a playground script, round trip, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.adapters import HardwareFlags, import_native
from oomless.errors import InputError
from tests.adapters.native_helpers import NATIVE, check_golden, imported, round_trip, seed_spec, verdict

HW = {"gpu": "A100-80GB"}


@pytest.mark.parametrize("case", ["before", "after"])
def test_native_s4_matches_the_seed_spec(case: str) -> None:
    spec = imported("orz", NATIVE / f"s4-{case}.py", **HW)
    seed = seed_spec(f"s4-{case}.yaml")
    # ORZ's flash_attn defaults to True and it runs on Ray; the seed spec left attention at sdpa
    # and ray off (no host RAM is judged for S4). All else is equal.
    assert spec.attention.value == "flash_attention_2" and spec.ray.enabled
    assert spec.model_copy(update={"attention": seed.attention, "ray": seed.ray}) == seed
    assert verdict(spec) == verdict(seed)


def _write(tmp_path: Path, body: str, prelude: str = "") -> Path:
    path = tmp_path / "exp.py"
    path.write_text(prelude + "from dataclasses import dataclass\n@dataclass\nclass PPOExpConfig(BasePPOExpConfig):\n"
                    "    pretrain: str = 'Qwen/Qwen2.5-1.5B-Instruct'\n" + body)
    return path


def test_expressions_are_evaluated_without_running(tmp_path: Path) -> None:
    path = _write(tmp_path, "    total_num_nodes: int = 16 if not DEBUG_MODE else 8\n    actor_num_nodes: int = total_num_nodes\n"
                  "    actor_num_gpus_per_node: int = 1\n    ref_num_nodes: int = total_num_nodes\n    ref_num_gpus_per_node: int = 1\n"
                  "    critic_num_nodes: int = total_num_nodes\n    critic_num_gpus_per_node: int = 1\n    colocate_all: bool = True\n"
                  "    vllm_num_engines: int = total_num_nodes\n    use_grpo: bool = True\n"
                  "    critic_pretrain: Optional[str] = '' if use_grpo else pretrain\n    generate_max_len: int = 8000\n"
                  "    prompt_max_len: int = 2048\n    packing_max_len: int = generate_max_len + prompt_max_len\n"
                  "    ckpt_path: str = f'orz_ckpt/{file_name}'\n    stop: ListConfig = ListConfig(['User:'])\n",
                  prelude="import os\nDEBUG_MODE = os.environ.get('DEBUG_MODE') == 'True'\nfile_name = os.path.basename(__file__)\n")
    result = import_native("orz", path, HardwareFlags(**HW))
    spec = imported("orz", path, **HW)
    assert (spec.hardware.gpus_per_node, spec.hardware.num_nodes) == (8, 2)  # 16 one-GPU "nodes"
    assert spec.algorithm.value == "grpo" and spec.lengths.max_completion_tokens == 8000
    assert [r.value for r in spec.placement.groups[0].roles] == ["actor", "reference", "vllm"]
    joined = "\n".join(result.ignored)
    assert "ckpt_path=f'orz_ckpt/{file_name}': not a literal" in joined
    assert "packing_max_len=10048: packed training rows" in joined


@pytest.mark.parametrize(("body", "field"), [
    ("    zero_stage: int = 4\n", "zero_stage"),
    ("    gpu_memory_utilization: float = compute()\n", "gpu_memory_utilization"),
    ("    colocate_all: bool = True\n    vllm_num_engines: int = 3\n", "vllm_num_engines"),
    ("    x = (\n", "exp.py"),
])
def test_bad_input_names_the_field(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        imported("orz", _write(tmp_path, body), **HW)
    assert err.value.field.endswith(field)


def test_no_config_class(tmp_path: Path) -> None:
    path = tmp_path / "exp.py"
    path.write_text("x = 1\n")
    with pytest.raises(InputError, match="PPOExpConfig"):
        imported("orz", path, **HW)


@pytest.mark.parametrize("case", ["before", "after"])
def test_export_round_trips(tmp_path: Path, case: str) -> None:
    spec = imported("orz", NATIVE / f"s4-{case}.py", **HW)
    assert round_trip("orz", spec, tmp_path, **HW) == [spec]
    if case == "before":
        check_golden(tmp_path / "orz_ppo_exp.py", "orz/orz_ppo_exp.py")
