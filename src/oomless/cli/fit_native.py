"""`oomless fit --from FW FILE`: the best configuration as changes of the user's own file.

`--write DIR` writes patched copies (the file, and any DeepSpeed JSON a changed value names)
into DIR, `--in-place` patches the originals keeping FILE.bak; a unified diff goes to the
screen; every field the framework's file cannot say is named in one warning; the written file
is read back with `--from` and planned, as `oomless plan --from` would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

FIELD = "--write"
NATIVE_ALTERNATIVES = 5
"""Answers fit is asked for with --from (whatever --top shows): the patch is the first of them
that the framework's file can say and that reads back as fitting."""


@dataclass
class NativeOutcome:
    changes: list[str]
    diff: str = ""
    message: str | None = None
    written: list[Path] = field(default_factory=list)
    read_back: str | None = None
    rank: int = 0
    """Which answer was patched: 0 the best, k the k-th alternative."""
    note: str | None = None


def _fits(run: Any, margin: Any) -> bool:
    from ..fit.probe import slack_vector
    from ..planner.plan import make_plan

    from ..planner.data_bound import data_capped

    return min(slack_vector(make_plan(data_capped(run.spec, run.arch), run.arch, run.gpu, run.archs), margin)) >= 0


def native_limits(framework: str, source: Path, run: Any) -> dict[str, Any]:
    """`FitOptions` fields that keep the search to what the framework's own files can say (the
    writer's check, and whether it generates every micro-step): the patch then says the answer."""
    from ..adapters.common import read_text
    from ..adapters.patch import rollout_every_micro_step, sayable

    return {"expressible": sayable(framework, source, read_text(source), run.spec),
            "rollout_every_micro_step": rollout_every_micro_step(framework)}


def check_targets(source: Path, write: Path | None, in_place: bool, overwrite: bool) -> None:
    """Refuse before searching: --in-place with --write, a DIR that is a file, a copy over the
    original, an existing copy without --overwrite."""
    if in_place and write is not None:
        raise InputError("--in-place", "give --write DIR or --in-place, not both")
    if write is not None:
        if write.exists() and not write.is_dir():
            raise InputError(FIELD, f"{write} is a file; with --from, --write takes a directory for the patched copies")
        target = write / source.name
        if target.resolve() == source.resolve():
            raise InputError(FIELD, f"{target} is the original; use --in-place to patch it (a .bak is kept)")
        if target.exists() and not overwrite:
            raise InputError(FIELD, f"{target} already exists; pass --overwrite to replace it")
    if in_place and _backup(source).exists() and not overwrite:
        raise InputError("--in-place", f"{_backup(source)} already exists; pass --overwrite to replace it")


def _backup(source: Path) -> Path:
    return source.with_name(source.name + ".bak")


def native_outcome(framework: str, source: Path, run: Any, choices: list[Any], hardware: Any, write: Path | None,
                   in_place: bool, overwrite: bool, margin: Any) -> NativeOutcome:
    """The patch of the first of ``choices`` (best first) whose patched file reads back as a
    plan that fits with ``margin``; else the best one's, with the message naming what the file
    cannot say."""
    from ..adapters.patch import settled_patch, unexpressed_message
    from ..adapters.common import read_text

    text = read_text(source)
    first_error: InputError | None = None
    tried: list[tuple[int, Any, Any, tuple[tuple[str, str], ...]]] = []
    for rank, choice in enumerate(choices):
        try:
            patch, problems, back = settled_patch(framework, source, text, run.spec, choice.run.spec, hardware, run.arch)
        except InputError as err:
            first_error = first_error or err
            continue
        tried.append((rank, choice, patch, problems))
        if back is not None and _fits(back, margin):
            break
    else:
        if not tried:
            assert first_error is not None
            if write is not None or in_place:
                raise InputError(FIELD if write is not None else "--in-place", f"{first_error.field}: {first_error.message}") from None
            return NativeOutcome([], message=f"{first_error.field}: {first_error.message}")
        tried = tried[:1]
    rank, choice, patch, problems = tried[-1]
    out = NativeOutcome([c.shown for c in patch.changes], message=unexpressed_message(framework, problems), rank=rank)
    if rank > 0:
        out.note = (f"the fastest configuration found cannot be written as a {framework} file that plans as fitting; "
                    f"the patch is alternative #{rank}, which can")
    folder = write if write is not None else source.parent if in_place else None
    out.diff = patch.diff(str((folder / source.name) if folder is not None else source))
    if folder is None or not patch.changes:
        return out
    files = {folder / source.name: patch.patched, **{folder / name: t for name, t in patch.companions}}
    for path in files:
        if path.exists() and not overwrite and path.resolve() != source.resolve():
            raise InputError(FIELD, f"{path} already exists; pass --overwrite to replace it")
    folder.mkdir(parents=True, exist_ok=True)
    if in_place:
        _backup(source).write_text(text, encoding="utf-8")
        out.written.append(_backup(source))
    for path, body in files.items():
        path.write_text(body, encoding="utf-8")
        out.written.append(path)
    out.read_back = _plan_back(framework, folder / source.name, hardware, margin, run.spec)
    return out


def _plan_back(framework: str, path: Path, hardware: Any, margin: Any, data_of: Any = None) -> str:
    """What `oomless plan --from` makes of the written file, with fit's margin (and, after
    `--data`, the data's distribution from ``data_of``: no file says it)."""
    from ..fit.probe import slack_vector
    from ..planner.plan import make_plan
    from ..planner.data_bound import data_capped
    from ..spec.lengths import with_data_fields
    from ..units import format_bytes
    from .import_cmd import load_native

    try:
        run, _ = load_native(path, framework, hardware)
    except InputError as err:
        return f"`oomless plan --from {framework} {path}` cannot read it: {err.field}: {err.message}"
    spec = with_data_fields(run.spec, data_of) if data_of is not None else run.spec
    plan = make_plan(data_capped(spec, run.arch), run.arch, run.gpu, run.archs)
    slack = min(slack_vector(plan, margin))
    verdict = "fits" if slack >= 0 else "does NOT fit"
    data = " --data ..." if spec.lengths.data_max_prompt_tokens else ""
    return (f"`oomless plan --from {framework} {path}{data}` reads it back: {verdict} with the margin "
            f"(tightest constraint {format_bytes(max(slack, 0)) if slack >= 0 else 'short by ' + format_bytes(-slack)})")
