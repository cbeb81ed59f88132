"""Read a run spec from YAML, validate it, and resolve its model and GPU from the catalogs.

Every failure is an `InputError` whose text is one line naming the field, the value and
what is allowed; nothing here prints or exits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..catalog.gpus import GpuSpec, load_gpu
from ..catalog.models import ModelArch
from ..catalog.resolve import load_model
from .. import safe_paths as SP
from ..errors import InputError
from ..safe_yaml import load_yaml
from .dataset import DataRef
from .ignored import ignored_fields
from .run import FinetuneMethod, Role, RolloutEngine, RunSpec


@dataclass(frozen=True)
class ResolvedRun:
    spec: RunSpec
    arch: ModelArch
    gpu: GpuSpec | None
    warnings: tuple[str, ...] = ()
    archs: dict[Role, ModelArch] = field(default_factory=dict)
    """Architectures of the critic and reward model when the spec names them."""
    data: DataRef | None = None
    """The training data the framework config names (specs name none): `plan --data auto`."""


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("spec", f"no such file: {p}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError("spec", f"cannot read {p}: {err}") from None
    try:
        data = load_yaml(text, str(p))
    except InputError as err:
        raise InputError("spec", f"{p}: {err.message}") from None
    if not isinstance(data, dict):
        raise InputError("spec", f"{p}: expected a mapping of fields at the top level, got {type(data).__name__}")
    return data


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model class that owns the field at ``loc`` (for listing allowed keys)."""
    model: Any = RunSpec
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _one_line(err: ValidationError) -> InputError:
    first = err.errors()[0]
    loc = tuple(first.get("loc", ()))
    field = ".".join(str(p) for p in loc) or "spec"
    kind, value = first.get("type", ""), first.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(loc)
        allowed = ", ".join(owner.model_fields) if owner else "see `oomless schema`"
        return InputError(field, f"unknown key; allowed here: {allowed}")
    if kind == "missing":
        return InputError(field, "required field is missing")
    msg = first.get("msg", "invalid value").removeprefix("Value error, ")
    ctx = first.get("ctx") or {}
    if "expected" in ctx:
        msg = f"allowed: {ctx['expected']}"
    shown = "" if isinstance(value, dict) else f"{value!r} is not valid; "
    return InputError(field, f"{shown}{msg}")


def parse_spec(data: dict[str, Any]) -> RunSpec:
    try:
        return RunSpec.model_validate(data)
    except ValidationError as err:
        raise _one_line(err) from None


def check_against_arch(spec: RunSpec, arch: ModelArch) -> None:
    """Rules that need the architecture: vLLM tensor parallelism must split the attention
    heads evenly, and the KV heads either evenly or by replication (TP a multiple of them).
    Source: vllm/config/parallel.py `verify_with_model_config`, QKVParallelLinear.
    Ulysses sequence parallelism splits the attention heads over its degree, so it must divide
    them. Source: verl `verl/models/transformers/monkey_patch.py` (asserts num_attention_heads
    % ulysses_sp_size == 0), DeepSpeed-Ulysses (arXiv 2309.14509, §3.1)."""
    sp = spec.distribution.sequence_parallel_size
    if arch.num_attention_heads % sp:
        raise InputError(
            "distribution.sequence_parallel_size",
            f"{sp} does not divide the {arch.num_attention_heads} attention heads of {arch.name}",
        )
    if spec.rollout.engine == RolloutEngine.hf:
        return
    tp = spec.rollout.tensor_parallel_size
    heads, kv = arch.num_attention_heads, arch.num_kv_heads
    if heads % tp:
        raise InputError("rollout.tensor_parallel_size", f"{tp} does not divide the {heads} attention heads of {arch.name}")
    if kv % tp and tp % kv:
        raise InputError(
            "rollout.tensor_parallel_size",
            f"{tp} neither divides nor is a multiple of the {kv} KV heads of {arch.name}",
        )


def _model_ref(ref: str, base_dir: Path | None) -> str:
    if base_dir is not None and not SP.path_problem(ref) and not Path(ref).is_absolute() and SP.exists(base_dir / ref):
        return str(base_dir / ref)
    return ref


def _load_as(field_name: str, ref: str, base_dir: Path | None) -> ModelArch:
    try:
        return load_model(_model_ref(ref, base_dir))
    except InputError as err:
        raise InputError(field_name, err.message) from None


def resolve(spec: RunSpec, base_dir: Path | None = None) -> ResolvedRun:
    """Resolve the models and the GPU. A relative model path is tried against ``base_dir``
    (the spec's folder) before the catalog, so a spec can sit next to its config.json."""
    arch = load_model(_model_ref(spec.model, base_dir), spec.model_revision)
    gpu = load_gpu(spec.hardware.gpu) if spec.hardware.gpu is not None else None
    check_against_arch(spec, arch)
    archs: dict[Role, ModelArch] = {}
    if spec.critic.model is not None:
        archs[Role.critic] = _load_as("critic.model", spec.critic.model, base_dir)
    if spec.reward_model.model is not None:
        archs[Role.reward] = _load_as("reward_model.model", spec.reward_model.model, base_dir)
    quant = arch.checkpoint.quantization if arch.checkpoint is not None else None
    if quant is not None and spec.finetune.method == FinetuneMethod.full:
        notes_full = (f"{arch.name} is stored pre-quantized ({quant.describe()}); transformers does not train quantized "
                      "weights, so full fine-tuning is planned on a bf16 copy (convert it first, as RL frameworks do); "
                      "LoRA would keep the stored format",)
    else:
        notes_full = ()
    notes = notes_full + tuple(dict.fromkeys(
        note for a in (arch, *archs.values())
        for note in (*a.warnings, *(a.checkpoint.notes if a.checkpoint is not None else ()))))
    return ResolvedRun(spec, arch, gpu, tuple(ignored_fields(spec)) + notes + _transformers_notes(spec, arch), archs)


def _transformers_notes(spec: RunSpec, arch: ModelArch) -> tuple[str, ...]:
    """A warning when the transformers release decides what a frozen vision tower keeps and
    the spec does not name it (planner.vision_terms.frozen_tower_keeps_activations)."""
    if (arch.vision is None or spec.vision.images_per_prompt == 0 or spec.tower_trains or not spec.gradient_checkpointing
            or spec.transformers_version is not None):
        return ()
    return ("transformers_version unset: the vision tower that does not train is planned without saved activations, "
            "as before transformers 5.0; from 5.0 gradient checkpointing makes its patch embedding require grad and "
            "it keeps its blocks' inputs for backward: set transformers_version (e.g. 5.2) to plan that",)


def load_run(path: str | Path) -> ResolvedRun:
    """YAML file → validated spec with its model architecture and GPU."""
    return resolve(parse_spec(read_yaml(path)), Path(path).resolve().parent)
