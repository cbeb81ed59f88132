"""The spec's `lengths` section: token limits, and what the data holds within them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from .base import INT64, Frozen
from .percentiles import Percentiles, check_percentiles


class Lengths(Frozen):
    """Token limits, and optionally what the data typically holds.

    The limits bound the worst batch the run can see; the typical lengths (the median of the
    dataset's prompts, of the run's completions) give the typical batch. `completion_clip_fraction`
    (the share of completions cut at the limit, which TRL logs as `completions/clipped_ratio` and
    verl as `response_length/clip_ratio`) gives the chance per step of a batch at the limit."""

    max_prompt_tokens: Annotated[int, Field(ge=1, le=2**24), INT64] = Field(512, description="Longest prompt in tokens. Default 512 (TRL).")
    max_completion_tokens: Annotated[int, Field(ge=1, le=2**24), INT64] = Field(256, description="Longest completion. Default 256 (TRL 0.2x).")
    typical_prompt_tokens: Annotated[int, Field(ge=1, le=2**24), INT64] | None = Field(
        None, description="Median prompt length of the dataset in tokens (`oomless stats`-style p50). Default: max_prompt_tokens."
    )
    max_prompt_counts_images: bool = Field(
        False,
        description="max_prompt_tokens bounds the encoded prompt, image tokens included: the framework drops or refuses "
        "longer prompts (verl and EasyR1 `max_prompt_length`: the processor's input_ids, filter_overlong_prompts / "
        "truncation 'error'), so the largest image is the one that fits the bound beside one text token. "
        "Default false: image tokens come on top of max_prompt_tokens of text.",
    )
    typical_completion_tokens: Annotated[int, Field(ge=1, le=2**24), INT64] | None = Field(
        None, description="Median completion length the policy generates (from a rollout dump: `oomless stats "
        "--completion-field`). Default: max_completion_tokens."
    )
    mean_prompt_tokens: Annotated[float, Field(gt=0, le=2**24)] | None = Field(
        None, description="Mean prompt length in tokens (`oomless stats`; verl logs `prompt_length/mean`). Bounds "
        "the tokens of a packed micro-batch (padding_free), which add up. Default: unknown."
    )
    mean_completion_tokens: Annotated[float, Field(gt=0, le=2**24)] | None = Field(
        None, description="Mean completion length the policy generates (TRL/ms-swift `completions/mean_length`, "
        "verl/EasyR1 `response_length/mean`; `oomless plan --run-log`). Bounds the tokens of a packed micro-batch. "
        "Default: unknown."
    )
    completion_clip_fraction: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None,
        description="Share of completions that reach max_completion_tokens (TRL `completions/clipped_ratio`, verl "
        "`response_length/clip_ratio`). Default: unknown, so a batch at the limit is assumed to occur.",
    )
    data_max_prompt_tokens: Annotated[int, Field(ge=1, le=2**24), INT64] | None = Field(
        None,
        description="Longest prompt of the whole dataset in tokens as the framework encodes it (chat template "
        "included; `oomless stats` gives it when it read every row with the model's tokenizer). The run sees no "
        "longer prompt, so a batch above it has no chance; the worst batch the limits allow is still planned and "
        "reported. Default: unknown.",
    )
    prompt_percentiles: Percentiles | None = Field(
        None,
        description="Prompt lengths at percentiles of the dataset, e.g. {90: 700, 99: 1000} (percentile in (0, 100) → "
        "tokens). With the typical length (p50) they bound the chance per step of a batch above a length. Default none.",
    )
    completion_percentiles: Percentiles | None = Field(
        None,
        description="Completion lengths at percentiles of the run's completions, e.g. {90: 900, 99: 2000} (verl "
        "`response_length/*`, TRL `completions/*_length`). Default none.",
    )

    @model_validator(mode="after")
    def _typical_within_limits(self) -> "Lengths":
        for kind in ("prompt", "completion"):
            typical, limit = getattr(self, f"typical_{kind}_tokens"), getattr(self, f"max_{kind}_tokens")
            if typical is not None and typical > limit:
                raise ValueError(f"typical_{kind}_tokens={typical} exceeds max_{kind}_tokens={limit}")
            check_percentiles(f"{kind}_percentiles", getattr(self, f"{kind}_percentiles"), typical, limit)
        data_max = self.data_max_prompt_tokens
        if data_max is not None:
            if self.typical_prompt_tokens is not None and self.typical_prompt_tokens > data_max:
                raise ValueError(f"typical_prompt_tokens={self.typical_prompt_tokens} exceeds data_max_prompt_tokens={data_max}")
            above = {k: v for k, v in (self.prompt_percentiles or {}).items() if v > data_max}
            if above:
                k = min(above)
                raise ValueError(f"prompt_percentiles[{k:g}]={above[k]} exceeds data_max_prompt_tokens={data_max}")
        for kind in ("prompt", "completion"):
            mean, limit = getattr(self, f"mean_{kind}_tokens"), getattr(self, f"max_{kind}_tokens")
            if mean is not None and mean > limit:
                raise ValueError(f"mean_{kind}_tokens={mean:g} exceeds max_{kind}_tokens={limit}")
        q = self.completion_clip_fraction
        if q is not None and self.mean_completion_tokens is not None and self.mean_completion_tokens < q * self.max_completion_tokens:
            raise ValueError(f"mean_completion_tokens={self.mean_completion_tokens:g} is below the {q:g} of completions at "
                             f"max_completion_tokens={self.max_completion_tokens} alone")
        if q is not None:
            below = [k for k, v in (self.completion_percentiles or {}).items() if v < self.max_completion_tokens]
            if below and max(below) / 100 > 1 - q:
                raise ValueError(
                    f"completion_percentiles put {max(below):g} % below max_completion_tokens, but "
                    f"completion_clip_fraction={q} puts {100 * q:g} % at it"
                )
        return self

    @property
    def typical_prompt(self) -> int:
        return self.typical_prompt_tokens or self.max_prompt_tokens

    @property
    def typical_completion(self) -> int:
        return self.typical_completion_tokens or self.max_completion_tokens


DATA_FIELDS = {"lengths": ("typical_prompt_tokens", "prompt_percentiles", "data_max_prompt_tokens", "mean_prompt_tokens",
                           "typical_completion_tokens", "completion_percentiles", "completion_clip_fraction",
                           "mean_completion_tokens"),
               "vision": ("typical_pixels", "pixels_percentiles", "typical_images_per_prompt")}
"""Spec fields of the data's distribution (`oomless stats`, `--data`), not of the run's configuration:
no framework file states them."""


def with_data_fields(spec: Any, source: Any) -> Any:
    """``spec`` (read back from a framework file) with ``source``'s data fields where it has none."""
    update = {}
    for section, names in DATA_FIELDS.items():
        mine, theirs = getattr(spec, section), getattr(source, section)
        values = {n: getattr(theirs, n) for n in names if getattr(mine, n) is None and getattr(theirs, n) is not None}
        if values:
            update[section] = mine.model_copy(update=values)
    return spec.model_copy(update=update) if update else spec
