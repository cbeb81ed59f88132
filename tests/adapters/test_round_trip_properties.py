"""Round trip as a property for every framework (issue 13, item 6): a spec the framework can
express → its writer's files → its reader → the same spec, field for field (batch, gradient
accumulation, round, TP, GPUs and nodes, placement, offloads, sleep level, lengths, LoRA, KL,
log-probs, schedule), for verl, EasyR1, VLM-R1, OpenRLHF and Open-Reasoner-Zero; verl's,
OpenRLHF's and ms-swift's exported keys and flags exist in the generated key table of the
release they are written for. What a framework cannot say is named in one message
(test_export_unexpressed_properties.py). TRL's and ms-swift's own round-trip properties are in
test_trl.py and test_swift.py. Strategies: round_trip_strategies.py.
"""

from __future__ import annotations

import yaml
from hypothesis import given

from oomless.adapters import common
from oomless.adapters import key_tables as KT
from oomless.mappings import flatten
from oomless.adapters.openrlhf.reader import CLASSIC, DOTTED, MARKERS
from oomless.adapters.swift.writer import export_files
from oomless.adapters.verl.keys import VERSION as VERL_VERSION
from oomless.spec.run import RunSpec
from tests.adapters.round_trip_strategies import (SETTINGS, assert_round_trip, assert_round_trip_or_named, easyr1_specs,
                                                  openrlhf_specs, orz_specs, unsayable_rounds, verl_specs, vlmr1_specs)
from tests.adapters.swift_cases import imported_spec
from tests.adapters.test_swift import swift_scripts

VERL_TABLE, OPENRLHF_TABLE = KT.load("verl"), KT.load("openrlhf")


def _verl_has(key: str, version: tuple[int, ...]) -> bool:
    """A key of the table, or one inside a mapping the table leaves open (`override_config: {}`)."""
    parts = key.split(".")
    return VERL_TABLE.exists_in(key, version) or any(
        VERL_TABLE.exists_in(p, version) and VERL_TABLE.default(p) in ({}, None)
        for p in (".".join(parts[:i]) for i in range(1, len(parts))))


@SETTINGS
@given(verl_specs())
def test_verl_round_trip_keeps_the_spec_and_writes_keys_of_its_release(spec: RunSpec) -> None:
    files = assert_round_trip_or_named("verl", spec, unsayable_rounds(spec))
    if files is None:
        return
    config = yaml.safe_load(files["verl_ppo.yaml"])
    keys = flatten({k: v for k, v in config.items() if k not in ("hydra", "defaults")})
    assert [k for k in keys if not _verl_has(k, KT.minor(VERL_VERSION))] == []


@SETTINGS
@given(easyr1_specs())
def test_easyr1_round_trip_keeps_the_spec(spec: RunSpec) -> None:
    assert_round_trip_or_named("easyr1", spec, unsayable_rounds(spec))


@SETTINGS
@given(vlmr1_specs())
def test_vlmr1_round_trip_keeps_the_spec(spec: RunSpec) -> None:
    assert_round_trip("vlmr1", spec)


@SETTINGS
@given(openrlhf_specs())
def test_openrlhf_round_trip_keeps_the_spec_in_both_flag_styles_with_flags_of_each_release(spec: RunSpec) -> None:
    files = assert_round_trip("openrlhf", spec)
    assert len(files) == 2
    for name, version in (("train_ppo_ray.sh", DOTTED), ("train_ppo_ray_classic.sh", CLASSIC)):
        args = common.command_with(common.parse_shell(files[name], name), MARKERS)[1]
        flags = [a for a in args if a.startswith("--")]
        assert flags and [f for f in flags if not OPENRLHF_TABLE.exists_in(f, KT.minor(version))] == []


@SETTINGS
@given(orz_specs())
def test_orz_round_trip_keeps_the_spec_and_its_placement(spec: RunSpec) -> None:
    assert_round_trip("orz", spec)


# --- ms-swift: exported flags against the generated key table ---------------------------------

SWIFT_TABLE, TRANSFORMERS_TABLE = KT.load("swift"), KT.transformers_table()


@SETTINGS
@given(swift_scripts())
def test_swift_exported_flags_exist_in_the_key_table_of_their_release(text: str) -> None:
    script = export_files(imported_spec(text))["run_grpo.sh"]  # raises when it does not read back to the spec
    version = common.parse_version("ms-swift", common.read_directives(script)["ms-swift"])
    names = [n for cmd in common.parse_shell(script, "run_grpo.sh") if cmd.argv[:2] == ("swift", "rlhf")
             for n in common.parse_flags(cmd.argv[2:], "run_grpo.sh")]
    unknown = {n for n in names if not (SWIFT_TABLE.exists_in(n, version) or n in TRANSFORMERS_TABLE)}
    assert names and unknown == set(), (version, unknown)
