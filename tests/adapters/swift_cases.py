"""Builders for ms-swift launch scripts used by the swift adapter tests."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from oomless.adapters import HardwareFlags
from oomless.adapters.swift.reader import import_text
from oomless.spec.load import parse_spec
from oomless.spec.run import RunSpec


def script(flags: dict[str, Any], env: dict[str, Any] | None = None, version: str | None = "4.6",
           vllm: str | None = None, pre: str = "") -> str:
    """A `swift rlhf --rlhf_type grpo` script with these flags (lists become several values)."""
    lines = []
    if version or vllm:
        directive = " ".join(x for x in (version and f"ms-swift=={version}", vllm and f"vllm=={vllm}") if x)
        lines.append(f"# oomless: {directive}")
    lines.append(pre)
    env_part = "".join(f"{k}={v} \\\n" for k, v in (env or {}).items())
    args = ["--rlhf_type grpo"]
    for name, value in flags.items():
        values = value if isinstance(value, list) else [value]
        args.append(f"--{name} " + " ".join(shlex.quote(str(v)) for v in values))
    return "\n".join(lines) + "\n" + env_part + "swift rlhf \\\n    " + " \\\n    ".join(args) + "\n"


def imported(text: str, gpu: str = "A100-80GB", **hardware: Any) -> tuple[dict, list[str], list[str]]:
    return import_text(text, Path("."), HardwareFlags(gpu=gpu, **hardware), "run.sh")


def imported_spec(text: str, gpu: str = "A100-80GB", **hardware: Any) -> RunSpec:
    return parse_spec(imported(text, gpu, **hardware)[0])
