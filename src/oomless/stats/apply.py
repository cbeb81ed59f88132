"""`oomless plan --data DATA`: the run's own dataset measured and written into its spec.

A framework config bounds prompts by its limits (or, with none, by the model's context), so the
plan's worst batch is the longest prompt the limits allow. The data decides what the run sees:
`measure` counts each row's prompt with the model's tokenizer (from the model's own folder or
the local Hugging Face cache; characters / 4 without one), and the spec gets the median, the
percentiles and, when every row was read with a tokenizer, the data's longest prompt
(`lengths.data_max_prompt_tokens`), all capped at the framework's limit (a longer prompt is
truncated or dropped by the framework, never trained at its full length). The plan then reports
the worst batch the limits allow beside the verdict from the batches the data holds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import safe_paths as SP
from ..catalog import hub
from ..errors import InputError
from ..memory import constants as C
from ..memory import vision_tokens as VT
from ..spec.dataset import DataRef
from ..spec.load import ResolvedRun
from ..spec.run import RunSpec
from .measure import DatasetStats, bounds_prompts, measure, spec_fragment
from .read import JSON_SUFFIXES, TABLE_SUFFIXES, read_rows

AUTO = "auto"
"""`--data auto`: the data the framework config names."""
DEFAULT_LIMIT = 100_000
"""Rows read at most (the first ones), as `oomless stats`."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""Files that mark a folder as holding a tokenizer: what transformers' `AutoTokenizer.from_pretrained`
reads first (fast tokenizer, then its config; transformers tokenization_utils_base.py)."""


def model_tokenizer(spec: RunSpec) -> str | None:
    """A local folder holding the tokenizer of ``spec.model``: the model folder itself, or its
    snapshot in the Hugging Face cache; None when neither has one (or transformers is missing)."""
    if importlib.util.find_spec("transformers") is None:
        return None
    local = Path(spec.model).expanduser()
    if local.is_dir():
        return str(local) if any((local / f).is_file() for f in TOKENIZER_FILES) else None
    if not hub.looks_like_repo_id(spec.model):
        return None
    for name in TOKENIZER_FILES:
        found = hub.cached_file(spec.model, name, spec.model_revision)
        if found is not None:
            return str(found.parent)
    return None


RENAMED = {"DATA": "--data", "--prompt-field": "--data (prompt column)", "--image-field": "--data (image column)"}
"""`oomless stats`' field names in its errors, as `plan/fit --data` users know them."""


def with_data(run: ResolvedRun, data: str, split: str = "train", tokenizer: str | None = None,
              limit: int = DEFAULT_LIMIT, config_folder: Path = Path(".")) -> tuple[ResolvedRun, list[str]]:
    """`_with_data`, its errors named by the options the user gave."""
    try:
        return _with_data(run, data, split, tokenizer, limit, config_folder)
    except InputError as err:
        if err.field in RENAMED:
            raise InputError(RENAMED[err.field], err.message) from None
        raise


def _with_data(run: ResolvedRun, data: str, split: str, tokenizer: str | None, limit: int,
               config_folder: Path) -> tuple[ResolvedRun, list[str]]:
    """The run with ``data``'s prompt lengths (and image sizes, for a model that takes images) in
    its spec, and one note per thing the reader should know about them. ``data`` "auto" is the
    data the framework config names (`ResolvedRun.data`), its paths from ``config_folder``."""
    spec, ref = run.spec, run.data
    sources, split, shown = _sources(run, data, split, config_folder)
    rows: list[dict[str, Any]] = []
    truncated = False
    roots = [_local(r, config_folder) for r in ref.image_roots] if ref is not None and data == AUTO else []
    for i, source in enumerate(sources):
        got, cut = read_rows(source, limit - len(rows), split, ref.subset if ref and data == AUTO else None)
        if i < len(roots) and ref.image_field:
            got = [_joined(row, ref.image_field, roots[i]) for row in got]
        rows, truncated = rows + got, truncated or cut
        if len(rows) >= limit:
            truncated = truncated or source != sources[-1]
            break
    notes: list[str] = []
    prompt_field, image_field = _fields(ref, rows[0], notes)
    tokenizer = tokenizer or model_tokenizer(spec)
    base = Path(sources[0]).parent if Path(sources[0]).is_file() else Path(sources[0])
    stats = measure(rows, truncated, tokenizer=tokenizer, prompt_field=prompt_field, image_field=image_field,
                    min_pixels=spec.vision.min_pixels or C.QWEN_VL_MIN_PIXELS,
                    max_pixels=spec.vision.max_pixels or C.QWEN_VL_MAX_PIXELS, base=base,
                    chat=ref.chat if ref else False, added_text=ref.added_text if ref else "",
                    template=ref.chat_template if ref else None, drop_answer=ref.drops_answer if ref else False)
    bound = _with_image_tokens(run, stats, notes) and _bound_is_sound(run, stats, notes)
    fragment = spec_fragment(stats)
    if not bound:
        fragment["lengths"].pop("data_max_prompt_tokens", None)
    notes.insert(0, _summary(stats, shown))
    lengths = _capped(fragment["lengths"], spec.lengths.max_prompt_tokens, notes)
    update: dict[str, Any] = {"lengths": {**spec.lengths.model_dump(exclude_unset=True), **lengths}}
    if "vision" in fragment and spec.vision.images_per_prompt > 0:
        update["vision"] = _vision(spec, dict(fragment["vision"]), notes)
    new = _updated(spec, update, "--data")
    return dataclasses.replace(run, spec=new), notes


def with_run_log(run: ResolvedRun, raw: dict[str, Any] | None, log: str) -> tuple[ResolvedRun, dict[str, Any] | None, list[str]]:
    """The run (and `fit`'s spec mapping) with the completion lengths an earlier run logged
    (`run_log`): its largest step mean, clipped share and mean prompt, in `lengths`."""
    from .run_log import read_run_log, run_log_lengths

    spec, notes = run.spec, []
    fields = run_log_lengths(read_run_log(log), spec.lengths.max_prompt_tokens, spec.lengths.max_completion_tokens, notes)
    lengths = {**spec.lengths.model_dump(exclude_unset=True), **fields}
    new = _updated(spec, {"lengths": lengths}, "--run-log")
    out_raw = None if raw is None else {**raw, "lengths": new.lengths.model_dump(mode="json", exclude_unset=True)}
    return dataclasses.replace(run, spec=new), out_raw, notes


def _updated(spec: RunSpec, update: dict[str, Any], option: str) -> RunSpec:
    """``spec`` with ``update``'s sections; figures the spec's rules refuse (against its limits)
    as one line naming ``option``."""
    try:
        return RunSpec.model_validate({**spec.model_dump(exclude_unset=True), **update})
    except ValidationError as err:
        first = err.errors()[0]
        raise InputError(option, f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def with_data_raw(run: ResolvedRun, raw: dict[str, Any], data: str, split: str = "train", tokenizer: str | None = None,
                  config_folder: Path = Path(".")) -> tuple[ResolvedRun, dict[str, Any], list[str]]:
    """`with_data`, and the spec mapping `fit` builds its candidates from (`fit.search.spec_data`)
    given the same lengths and vision sections."""
    new, notes = with_data(run, data, split, tokenizer, config_folder=config_folder)
    sections = {name: getattr(new.spec, name).model_dump(mode="json", exclude_unset=True) for name in ("lengths", "vision")}
    return new, {**raw, **sections}, notes


def _local(path: str, folder: Path) -> str:
    """A relative path as the framework resolves it: from the current folder, else ``folder``."""
    named = Path(path).expanduser()
    if named.is_absolute() or SP.exists(named):
        return str(named.resolve())
    return str((folder / named).resolve())


def _joined(row: dict[str, Any], field: str, root: str) -> dict[str, Any]:
    """``row`` with its relative image paths joined to ``root`` (VLM-R1 `--image_folders`)."""
    value = row.get(field)
    join = (lambda p: str(Path(root).expanduser() / p) if isinstance(p, str) and not Path(p).is_absolute() else p)
    if isinstance(value, list):
        return {**row, field: [join(v) for v in value]}
    return {**row, field: join(value)} if value is not None else row


def _fields(ref: DataRef | None, row: dict[str, Any], notes: list[str]) -> tuple[str | None, str | None]:
    """The framework's prompt and image columns (its config's, else the usual names), the
    config's prompt column replaced by a guess, with a note, where the data lacks it."""
    prompt = ref.prompt_field if ref else None
    if prompt is not None and prompt not in row:
        notes.append(f"{ref.key}'s prompt column {prompt!r} is not in the data (columns: {', '.join(map(str, row))}): "
                     "the usual prompt names tried instead")
        prompt = None
    image = ref.image_field if ref else None
    return prompt, image if image in row else None  # a framework's default image column, absent in text data


def _with_image_tokens(run: ResolvedRun, stats: DatasetStats, notes: list[str]) -> bool:
    """Where the prompt limit counts image tokens (verl, EasyR1: `max_prompt_counts_images`),
    each row's images as the LLM tokens they become, added to its count; False (no bound from
    the data) where a row's image could not be read."""
    v, ln = run.arch.vision, run.spec.lengths
    if not ln.max_prompt_counts_images or v is None or run.spec.vision.images_per_prompt == 0:
        return True
    if stats.image_field is None:
        notes.append("the prompt limit counts image tokens but the data has no image column: no bound from the data")
        return False
    vis = run.spec.vision
    sound = True
    for i, sizes in enumerate(stats.row_image_sizes):
        if sizes is None:
            sound = False
            continue
        stats.prompt_tokens[i] += sum(VT.num_image_tokens(v, h, w, min_pixels=vis.min_pixels or C.QWEN_VL_MIN_PIXELS,
                                                          max_pixels=vis.max_pixels or C.QWEN_VL_MAX_PIXELS,
                                                          max_tiles=vis.max_tiles) for h, w in sizes)
    if not sound:
        notes.append(f"{stats.unreadable_images} image(s) could not be read: no bound from the data")
    return sound


def _bound_is_sound(run: ResolvedRun, stats: DatasetStats, notes: list[str]) -> bool:
    ref = run.data
    if ref is not None and ref.missing:
        notes.append(f"{ref.missing} is not counted (not readable here): the text it adds to every prompt is "
                     "missing from the counts, so the data gives no bound")
        return False
    if run.spec.lengths.max_prompt_counts_images:
        # verl/EasyR1: the dataset pads every prompt to max_prompt_length (host_phases.ray_step_batch)
        notes.append("the prompt limit here is max_prompt_length, to which verl/EasyR1 pad every prompt: the data's "
                     "longest prompt does not bound their tensors, so it gives typical lengths only")
        return False
    if ref is None and not stats.templated and bounds_prompts(stats):
        notes.append("plain-text prompts without a framework config: the template the framework wraps them in is not "
                     "counted, so the data gives no bound (plan with --from, or give chat-message prompts)")
        return False
    return True


def _vision(spec: RunSpec, vision: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    if vision["typical_images_per_prompt"] > spec.vision.images_per_prompt:
        notes.append(f"the data's median prompt has {vision['typical_images_per_prompt']} images, above the "
                     f"{spec.vision.images_per_prompt} planned: typical images per prompt kept at the plan's")
        vision["typical_images_per_prompt"] = spec.vision.images_per_prompt
    if vision["typical_images_per_prompt"] == 0:
        vision.pop("typical_images_per_prompt")
        notes.append("the data's median prompt has no image: the typical batch is planned with the plan's images")
    return {**spec.vision.model_dump(exclude_unset=True), **vision}


def _sources(run: ResolvedRun, data: str, split: str, folder: Path) -> tuple[list[str], str, str]:
    """(sources to read, split, how to name them) of ``data``."""
    if data != AUTO:
        return [data], split, data
    ref = run.data
    if ref is None:
        raise InputError("--data", "auto: the config names no training data (or is a spec); give a file, a dataset "
                         "folder or a cached Hub dataset id")
    sources = []
    for source in ref.sources:
        path = Path(source).expanduser()  # relative: from where the framework runs (here), else the config's folder
        local = path if path.is_absolute() or SP.exists(path) else folder / path
        if SP.exists(local):
            sources.append(str(local))
        elif hub.looks_like_repo_id(source) and not _file_like(source):
            sources.append(source)  # a Hub dataset id: read from the local cache
        else:
            unset = " (a variable this environment does not set)" if "$" in source else ""
            raise InputError("--data", f"auto: {ref.key} names {source!r}{unset}, which is not here (relative paths are "
                             f"read from the current folder and {folder}); give --data PATH")
    subset = f" ({ref.subset})" if ref.subset else ""
    return sources, ref.split, f"{ref.key}={','.join(ref.sources)}{subset}"


def _file_like(source: str) -> bool:
    return source.startswith((".", "/", "~")) or Path(source).suffix in (*JSON_SUFFIXES, *TABLE_SUFFIXES, ".csv")


def _summary(stats: DatasetStats, data: str) -> str:
    more = f"the first {stats.num_rows} rows" if stats.truncated else f"{stats.num_rows} rows"
    text = (f"--data {data}: {more}, prompts from {stats.prompt_field!r} counted by {stats.tokens_from}; "
            f"longest {max(stats.prompt_tokens)} tokens")
    if stats.image_field is not None:
        text += f"; images from {stats.image_field!r}: {len(stats.pixels)} read, {stats.unreadable_images} unreadable"
    if not bounds_prompts(stats):
        why = "not every row was read" if stats.truncated else "the count is an estimate"
        text += f" (not used as a bound: {why}; a model tokenizer in the local cache makes it one)"
    return text


def _capped(lengths: dict[str, Any], limit: int, notes: list[str]) -> dict[str, Any]:
    """The data's lengths within the framework's prompt limit."""
    out = dict(lengths)
    longest = out.pop("data_max_prompt_tokens", None)
    if longest is not None and longest < limit:
        out["data_max_prompt_tokens"] = longest
    elif longest is not None:
        notes.append(f"the data holds prompts up to {longest} tokens, at or beyond the limit of {limit}: the framework "
                     "truncates or drops longer ones, so the limit stays the worst prompt")
    out["typical_prompt_tokens"] = min(out["typical_prompt_tokens"], limit)
    out["prompt_percentiles"] = {k: min(v, limit) for k, v in out["prompt_percentiles"].items()}
    if "mean_prompt_tokens" in out:
        out["mean_prompt_tokens"] = min(out["mean_prompt_tokens"], limit)  # E[min(X, L)] ≤ min(E[X], L)
    return out
