"""frontends.hydra: YAML + defaults list + overrides over a framework's defaults, interpolations resolved."""

from __future__ import annotations

from pathlib import Path

import pytest

from oomless.errors import InputError
from oomless.frontends.hydra import Override, compose

DEFAULTS = {"actor.budget": 16384, "actor.dynamic": False, "ref.budget": "${oc.select:actor.budget,8192}",
            "ref.dynamic": "${oc.select:actor.dynamic,false}", "critic.fwd": "${.ppo}", "critic.ppo": 32768,
            "out.dir": "ckpt/${actor.budget}", "nested.pick": "${oc.select:missing.key,${actor.budget}}"}


def test_interpolations_follow_the_users_values() -> None:
    text = "defaults:\n  - ppo_trainer\n  - _self_\nactor:\n  dynamic: true\n  budget: 24000\n"
    composed = compose(DEFAULTS, text, "cfg.yaml", [Override("critic.ppo=4096", "run.sh:3"), Override("+extra.k=[1, 2]", "run.sh:3")],
                       own_configs=("ppo_trainer",))
    v = composed.values
    assert (v["ref.budget"], v["ref.dynamic"], v["critic.fwd"], v["out.dir"], v["nested.pick"]) == (24000, True, 4096, "ckpt/24000", 24000)
    assert composed.user == {"actor.dynamic": True, "actor.budget": 24000, "critic.ppo": 4096, "extra.k": [1, 2]}
    assert composed.lines["actor.budget"] == "cfg.yaml:6" and composed.lines["critic.ppo"] == "run.sh:3"


def test_deletion_and_local_defaults_list(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("actor:\n  budget: 1000\n")
    (tmp_path / "rollout").mkdir()
    (tmp_path / "rollout" / "small.yaml").write_text("n: 2\n")
    text = "defaults:\n  - base\n  - rollout: small\n  - _self_\nactor:\n  dynamic: true\n"
    composed = compose(DEFAULTS, text, str(tmp_path / "cfg.yaml"), [Override("~critic", "run.sh:1")], folder=tmp_path)
    assert composed.values["actor.budget"] == 1000 and composed.values["rollout.n"] == 2
    assert "critic.ppo" not in composed.values


@pytest.mark.parametrize(("text", "where", "what"), [
    ("a:\n  b: ${nope.x}\n", "cfg.yaml:2", "a.b: broken interpolation '${nope.x}' (interpolation key 'nope.x' not found)"),
    ("a: ${b}\nb: ${a}\n", "cfg.yaml:1", "interpolation cycle"),
    ("a:\n  b: ${eval:1+2}\n", "cfg.yaml:2", "Unsupported interpolation type eval"),
    ("a: [1, 2\n", "cfg.yaml:2", "malformed YAML"),
])
def test_broken_configs_name_file_and_line(text: str, where: str, what: str) -> None:
    with pytest.raises(InputError) as err:
        compose({}, text, "cfg.yaml")
    assert err.value.field == where and what in err.value.message


def test_an_override_that_is_not_one_names_its_line() -> None:
    with pytest.raises(InputError, match=r"^run.sh:4: 'stray' is not an override; allowed: key=value"):
        compose({}, None, "run.sh", [Override("stray", "run.sh:4")])
