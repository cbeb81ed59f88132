"""Patched copies of a user's own framework files: the changes `fit` found, written in the
framework's keys into the user's file, nothing else touched.

The spec → native key mapping is each writer's `native_settings(spec, dialect)` (the one the
exporter renders from): a change is every native key whose value differs between the old and
the new spec's settings. Where the key goes depends on the file: a YAML (ruamel round trip,
comments kept), a launch script (`flags`, `switch_flags` or Hydra `hydra` overrides, only the
changed words edited; a `hydra` writer's `added_override_prefix(path, text)` says which new keys
take `+`), an ORZ experiment file (the field's literal, via `ast`). The patched
text is then read back with the framework's own reader and compared with the wanted spec:
every field that does not read back (no native key in this file, or a value the framework
cannot take) is named in one message.
"""

from __future__ import annotations

import difflib
import importlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import common as C
from ..round_trip import all_differences, same_spec_dict, unstated_releases, value_at
from . import python_text as PY
from . import shell_text as SH
from . import yaml_text as YM


@dataclass(frozen=True)
class NativeChange:
    key: str
    old: Any
    """The value the user's file gives (None: not set there)."""
    new: Any
    """None: the key is removed (the framework's default applies)."""
    shown: str
    """The change in the file's own syntax: `--vllm_gpu_memory_utilization 0.8 → 0.4`."""


@dataclass(frozen=True)
class Patch:
    framework: str
    source: Path
    text: str
    patched: str
    changes: tuple[NativeChange, ...]
    unexpressed: tuple[tuple[str, str], ...]
    """(spec field, why) for every wanted value the patched file does not say."""
    companions: tuple[tuple[str, str], ...] = ()
    """New files a changed value names (a DeepSpeed JSON the writer renders): (name, text)."""

    def diff(self, new_name: str) -> str:
        return "".join(difflib.unified_diff(self.text.splitlines(keepends=True), self.patched.splitlines(keepends=True),
                                             fromfile=str(self.source), tofile=new_name))


def writer(framework: str) -> Any:
    from .. import canonical

    return importlib.import_module(f"oomless.adapters.{canonical(framework)}.writer")


def file_style(path: Path, module: Any) -> str:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix == ".py":
        return "python"
    return module.NATIVE_STYLE


def settings(module: Any, spec: Any, dialect: Any, fallback: Any = None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The writer's native settings of ``spec``, and the fields it could not express (those keep
    ``fallback``'s value where the framework allows it)."""
    from ...errors import InputError

    with C.collect_unexpressed(fallback) as found:
        try:
            values = module.native_settings(spec, dialect)
        except (KeyError, ValueError, TypeError, IndexError, ZeroDivisionError) as err:
            # a layout the writer has no branch for (it refused an earlier field and went on)
            fields = ", ".join(f for f, _ in found) or "the configuration"
            raise InputError(fields, f"{module.__name__.split('.')[2]} cannot express it "
                             f"({type(err).__name__}: {err})") from None
    return values, found


class _File:
    """The user's file, read in its style: which keys it sets and to what."""

    def __init__(self, path: Path, text: str, style: str, keys: list[str],
                 added_prefix: SH.AddedPrefix | None = None, special: Any = None) -> None:
        self.path, self.text, self.style, self.where = path, text, style, str(path)
        self.added_prefix, self.special = added_prefix, special
        if special is not None:  # a writer's own file kind (TRL: open-r1's sbatch job, trl/slurm_patch.py)
            return
        if style == "yaml":
            self.data = YM.load(text, self.where)
        elif style == "python":
            self.fields = PY.field_nodes(text, self.where)[1]
        else:
            self.command = SH.pick_command(text, keys, style, self.where)

    def value(self, key: str) -> Any:
        if self.special is not None:
            return self.special.value(key)
        if self.style == "yaml":
            found = YM.get(self.data, key)
            return None if found is YM.MISSING else found
        if self.style == "python":
            node = self.fields.get(key)
            return None if node is None else PY.source_of(self.text, node)
        return SH.current_value(self.command, key, self.style)

    def patch(self, values: dict[str, Any], keys: list[str]) -> str:
        if self.special is not None:
            return self.special.patch(values)
        if self.style == "yaml":
            return YM.patch_yaml(self.text, values, self.where)
        if self.style == "python":
            return PY.patch_python(self.text, values, self.where)
        return SH.patch_shell(self.text, values, self.style, self.where, keys, self.added_prefix)


def _shown(style: str, key: str, old: Any, new: Any) -> str:
    def v(value: Any, unset: str) -> str:
        if value is None:
            return unset
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return " ".join(str(x) for x in value) if style.endswith("flags") else SH.hydra_value(value)
        return str(value)

    if key.startswith(SH.ENV_PREFIX):
        return f"{key[len(SH.ENV_PREFIX):]}={v(old, '(unset)')} → {v(new, '(kept)')}"
    if style == "switch_flags" and (isinstance(new, bool) or new is None):
        return f"{SH.flag_name(key)}: {'added' if new else 'removed'}"
    if style.endswith("flags"):
        return f"{SH.flag_name(key)} {v(old, '(unset)')} → {v(new, '(removed: default)')}"
    if style == "hydra":
        return f"{key}={v(old, '(unset)')} → {v(new, '(removed: default)')}"
    if style == "python":
        return f"{key} = {v(old, '(unset)')} → {repr(new) if new is not None else '(default)'}"
    return f"{key}: {v(old, '(unset)')} → {v(new, '(removed: default)')}"


def plan_patch(framework: str, path: Path, text: str, old_spec: Any, new_spec: Any, pin: frozenset[str] = frozenset()) -> Patch:
    """The patch of ``text`` (the user's file at ``path``) from ``old_spec`` (what it reads as)
    to ``new_spec``; `unexpressed` holds what the writer itself cannot say (see `read_back`).
    Keys in ``pin`` are written with the new spec's value even where it equals the old one
    (`settled_patch`: a value the file leaves to a default derived from keys that changed)."""
    module = writer(framework)
    dialect, f, old_values = _read_as(module, path, text, old_spec)
    new_values, unexpressed = settings(module, new_spec, dialect, fallback=old_spec)
    _, old_unexpressed = settings(module, old_spec, dialect)
    wanted = {k: new_values.get(k) for k in [*new_values, *old_values]
              if (new_values.get(k) != old_values.get(k) or k in pin and f.value(k) != new_values.get(k))
              and not (new_values.get(k) is None and f.value(k) is None)}
    changes = tuple(NativeChange(k, f.value(k), v, _shown(f.style, k, f.value(k), v)) for k, v in wanted.items())
    patched = f.patch(wanted, list(old_values)) if wanted else text
    known = {field for field, _ in old_unexpressed}
    return Patch(framework, path, text, patched, changes, tuple(u for u in unexpressed if u[0] not in known),
                 _companions(module, new_spec, wanted))


def _read_as(module: Any, path: Path, text: str, old_spec: Any) -> tuple[Any, _File, dict[str, Any]]:
    """The writer's dialect the user's file is written in (the one its reader reads it as,
    where the writer says: `file_dialect`; else the one whose keys it sets most), the file read
    in it, and the old spec's native settings in it."""
    style = file_style(path, module)
    special_file = getattr(module, "special_file", None)
    special = special_file(path, text) if special_file is not None and style != "yaml" else None
    style = special.STYLE if special is not None else style
    best: tuple[int, Any, Any, dict[str, Any]] | None = None
    known = getattr(module, "file_dialect", None)
    dialects = (known(text, str(path)),) if known is not None else module.NATIVE_DIALECTS
    prefixer = getattr(module, "added_override_prefix", None)
    added = prefixer(path, text) if prefixer is not None and style == "hydra" else None
    for dialect in dialects:
        old_values, _ = settings(module, old_spec, dialect)
        f = _File(path, text, style, list(old_values), added, special)
        present = sum(f.value(k) is not None for k in old_values)
        if best is None or present > best[0]:
            best = (present, dialect, f, old_values)
    assert best is not None
    return best[1], best[2], best[3]


def sayable(framework: str, path: Path, text: str, old_spec: Any) -> Callable[[Any], bool] | None:
    """For `fit --from`: a check that the framework's writer, in the dialect of the user's file,
    can say every value of a spec (fields it could not say of ``old_spec`` either are left to
    `read_back`); None when it cannot say ``old_spec`` at all (then nothing is restricted)."""
    from ...errors import InputError

    module = writer(framework)
    try:
        dialect, f, _ = _read_as(module, path, text, old_spec)
        _, old_found = settings(module, old_spec, dialect)
    except InputError:
        return None
    known = {field for field, _ in old_found}
    # what a writer's own file kind cannot change (trl/slurm_patch.py)
    fixed = f.special.fixed(old_spec) if f.special is not None and hasattr(f.special, "fixed") else ()

    def attr(spec: Any, dotted: str) -> Any:
        for name in dotted.split("."):
            spec = getattr(spec, name)
        return spec

    def check(spec: Any) -> bool:
        if any(attr(spec, name) != attr(old_spec, name) for name in fixed):
            return False
        try:
            _, found = settings(module, spec, dialect, fallback=old_spec)
        except InputError:
            return False
        return all(field in known for field, _ in found)

    return check


def rollout_every_micro_step(framework: str) -> bool:
    """The framework generates once per micro-step (its writer says so: `ROLLOUT_EVERY_MICRO_STEP`)."""
    return bool(getattr(writer(framework), "ROLLOUT_EVERY_MICRO_STEP", False))


def _companions(module: Any, spec: Any, wanted: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The writer's own rendering of each file a changed value names (`--deepspeed ds_config.json`)."""
    from ...errors import InputError

    names = {v for v in wanted.values() if isinstance(v, str) and v.endswith((".json", ".yaml", ".yml"))}
    if not names:
        return ()
    try:
        with C.collect_unexpressed():
            files = module.render_files(spec)
    except InputError:
        return ()
    return tuple((name, files[name]) for name in sorted(names) if name in files)


def settled_patch(framework: str, path: Path, text: str, old_spec: Any, new_spec: Any, hardware: Any,
                  arch: Any) -> tuple[Patch, tuple[tuple[str, str], ...], Any]:
    """`plan_patch`, read back (`read_back_run`); where the read-back differs, every native key
    whose value differs between the read-back spec and ``new_spec`` is written out and the file
    patched once more. A key the file leaves unset can have a default the framework derives
    from other keys (ms-swift sizes a colocated engine's max_num_seqs from the per-device batch
    × vLLM TP × steps_per_generation): the old and the new spec then state the same value, yet
    the patched file, the key still unset, derives another one. Returns (patch, problems, the
    read-back run or None)."""
    patch = plan_patch(framework, path, text, old_spec, new_spec)
    problems, back = read_back_run(patch, hardware, new_spec, arch)
    from ...errors import InputError

    if not problems or back is None:
        return patch, problems, back
    module = writer(framework)
    dialect, _, _ = _read_as(module, path, text, old_spec)
    try:
        have, _ = settings(module, back.spec, dialect)
    except InputError:  # a read-back the writer cannot say: keep the first patch
        return patch, problems, back
    new_values, _ = settings(module, new_spec, dialect, fallback=old_spec)
    changed = {c.key for c in patch.changes}
    pin = frozenset(k for k, v in new_values.items() if v is not None and have.get(k) != v and k not in changed)
    if not pin:
        return patch, problems, back
    again = plan_patch(framework, path, text, old_spec, new_spec, pin)
    problems_again, back_again = read_back_run(again, hardware, new_spec, arch)
    if len(problems_again) < len(problems):
        return again, problems_again, back_again
    return patch, problems, back


def read_back(patch: Patch, hardware: Any, new_spec: Any, arch: Any) -> tuple[tuple[str, str], ...]:
    return read_back_run(patch, hardware, new_spec, arch)[0]


def read_back_run(patch: Patch, hardware: Any, new_spec: Any, arch: Any) -> tuple[tuple[tuple[str, str], ...], Any]:
    """(field, why) for every field of ``new_spec`` the patched file does not read back to: the
    file is read by the framework's own reader in a scratch folder beside links to the files
    next to the original (so the names it refers to resolve as they did)."""
    from .. import import_native
    from ...errors import InputError
    from ...planner.roles import placement_groups
    from ...spec.lengths import with_data_fields
    from ...spec.load import parse_spec, resolve

    with tempfile.TemporaryDirectory(prefix="oomless-patch-") as tmp:
        folder = patch.source.resolve().parent
        for entry in sorted(os.listdir(folder))[:500]:
            if entry != patch.source.name:
                os.symlink(folder / entry, Path(tmp) / entry)
        for name, text in patch.companions:
            link = Path(tmp) / name
            if link.is_symlink():
                link.unlink()
            link.write_text(text, encoding="utf-8")
        target = Path(tmp) / patch.source.name
        target.write_text(patch.patched, encoding="utf-8")
        try:  # the data's distribution (`--data`) is no file's: it comes back from the wanted spec
            got = with_data_fields(parse_spec(import_native(patch.framework, target, hardware).spec), new_spec)
            run = resolve(got, patch.source.resolve().parent)
        except InputError as err:
            return ((err.field, f"the patched file does not read back: {err.message}"),), None
    wanted, have = same_spec_dict(new_spec, arch), same_spec_dict(got, arch)
    unstated_releases(wanted, have)
    if wanted["rollout"].get("max_num_seqs") is None and have["rollout"].get("max_num_seqs") is not None:
        wanted["rollout"]["max_num_seqs"] = planned_max_num_seqs(new_spec)  # None: the size the plan uses
    listed = {field for field, _ in patch.unexpressed}
    if placement_groups(new_spec) == placement_groups(got):
        listed.add("placement.groups")  # written out or left to the default, the same GPUs hold the same roles
    listed |= _without_effect(new_spec) | _without_effect(got)  # e.g. ZeRO-3 buckets once the answer is ZeRO-1
    out = list(patch.unexpressed)
    for field in all_differences(wanted, have):
        if field not in listed:
            out.append((field, f"wanted {value_text(value_at(wanted, field))}, the file gives {value_text(value_at(have, field))}"))
    return tuple(out), run


def _without_effect(spec: Any) -> set[str]:
    """Fields ``spec`` sets that the rest of it makes irrelevant (`spec.ignored`): written out or
    left to the framework's default, they plan the same run."""
    from ...spec.ignored import ignored_fields
    from ...spec.run import RolloutEngine

    out = {message.split(" is ignored", 1)[0] for message in ignored_fields(spec)}
    if spec.rollout.engine == RolloutEngine.hf:  # no vLLM role: no engine, no weight sync (planner.gpu_phases)
        out |= {f"rollout.{name}" for name in HF_IRRELEVANT}
    return out


HF_IRRELEVANT = ("weight_sync_batches", "cuda_graphs_in_budget", "empty_cache_before_rollout", "max_num_seqs",
                 "max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "enforce_eager",
                 "limit_images_per_prompt", "sleep_level", "offload_model", "offload_optimizer")
"""vLLM engine fields: with `rollout.engine: hf` nothing reads them, set or not."""


def planned_max_num_seqs(spec: Any) -> int:
    """The vLLM engine size the plan uses: the spec's `max_num_seqs`, else vLLM's default for
    the GPU (planner.shape). A writer that must state a number (ms-swift sizes an unset engine
    itself) writes this one."""
    if spec.rollout.max_num_seqs is not None:
        return int(spec.rollout.max_num_seqs)
    from ...catalog.gpus import load_gpu
    from ...memory.vllm import default_max_num_seqs
    from ...planner.shape import capacity_bytes

    gpu = load_gpu(spec.hardware.gpu) if spec.hardware.gpu else None
    return default_max_num_seqs(capacity_bytes(spec, gpu), gpu is not None and gpu.id.startswith("A100"))


def value_text(value: Any) -> str:
    return "the planner's default" if value is None else repr(value)


def unexpressed_message(framework: str, items: tuple[tuple[str, str], ...]) -> str | None:
    """One message naming every field the framework's files cannot say, or None."""
    if not items:
        return None
    return f"{framework} cannot express {len(items)} change(s); set them by hand or keep the spec: " + "; ".join(
        f"{field} ({why})" for field, why in items)
