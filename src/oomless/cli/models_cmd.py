"""`oomless models [ID]`: the shipped catalog, or one model as oomless reads it.

Examples:
    oomless models                         # every shipped id: parameters, layers, family
    oomless models --json
    oomless models Qwen/Qwen2.5-VL-7B-Instruct
    oomless models ./checkpoints/step-500 --json      # a local folder, cache or Hub id
    oomless models Qwen/Qwen3-8B --revision 2069b3f
"""

from __future__ import annotations

import json
from typing import Any

import typer

from .main import run_guarded

MODEL_ARGUMENT = typer.Argument(None, help="A catalog or Hub id, a local folder or a config.json path; "
                                "omitted: list the shipped catalog.")
REVISION_OPTION = typer.Option(None, "--revision", help="Hub revision (branch, tag or commit) for a Hub id.")
JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of text.")


def _summary(arch: Any) -> dict[str, Any]:
    from ..memory.params import num_active_parameters, num_config_parameters
    from ..memory.vllm import kv_bytes_per_token
    from ..memory.vision_tokens import max_image_tokens

    info = arch.checkpoint
    analytic = num_config_parameters(arch)
    exact = info.exact_num_parameters if info is not None else None
    out: dict[str, Any] = {
        "id": arch.name,
        "model_type": arch.model_type,
        "found": info.where if info is not None else arch.source,
        "num_parameters": analytic,
        "num_active_parameters": num_active_parameters(arch),
        "num_layers": arch.num_layers,
        "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.num_attention_heads,
        "num_kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "vocab_size": arch.vocab_size,
        "max_position_embeddings": arch.max_position_embeddings,
        "kv_cache_bytes_per_token": kv_bytes_per_token(arch, 1),
        "vision_tokens_per_image": max_image_tokens(arch.vision) if arch.vision is not None else None,
        "exact_num_parameters": exact,
        "exact_parameter_counts": dict(info.parameter_counts) if info is not None and info.parameter_counts else None,
        "exact_parameter_count_source": info.parameter_count_source if info is not None and exact else None,
        "quantization": info.quantization.describe() if info is not None and info.quantization else None,
        "notes": list(info.notes) if info is not None else [],
    }
    if exact:
        out["analytic_vs_exact_pct"] = round(100 * (analytic - exact) / exact, 3)
    return out


def _show(model: str, revision: str | None, as_json: bool) -> int:
    from ..catalog.resolve import load_model

    s = _summary(load_model(model, revision))
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return 0
    typer.echo(f"{s['id']}  ({s['model_type']}, found in {s['found']})")
    active = "" if s["num_active_parameters"] == s["num_parameters"] else f", {s['num_active_parameters'] / 1e9:.2f} B active"
    typer.echo(f"  parameters        {s['num_parameters']:,} ({s['num_parameters'] / 1e9:.2f} B{active}; from config.json)")
    if s["exact_num_parameters"]:
        typer.echo(f"  exact parameters  {s['exact_num_parameters']:,} ({s['exact_parameter_count_source']}); "
                   f"config.json count differs by {s['analytic_vs_exact_pct']:+.3f} %")
    typer.echo(f"  layers            {s['num_layers']} (hidden {s['hidden_size']}, heads {s['num_attention_heads']}, "
               f"KV heads {s['num_kv_heads']}, head dim {s['head_dim']})")
    typer.echo(f"  KV cache          {s['kv_cache_bytes_per_token']:,} bytes per token (bf16, one GPU)")
    if s["vision_tokens_per_image"] is not None:
        typer.echo(f"  vision            {s['vision_tokens_per_image']:,} tokens per image at the default limits")
    if s["quantization"]:
        typer.echo(f"  stored as         {s['quantization']}")
    for note in s["notes"]:
        typer.echo(f"  note: {note}")
    return 0


def _list(as_json: bool) -> int:
    from ..catalog.resolve import catalog_ids, load_catalog_model
    from ..memory.params import num_parameters

    rows = []
    for ref in catalog_ids():
        arch = load_catalog_model(ref)
        rows.append({"id": ref, "model_type": arch.model_type, "num_parameters": num_parameters(arch),
                     "num_layers": arch.num_layers, "vision": arch.vision is not None})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return 0
    id_width = max((len(r["id"]) for r in rows), default=0)
    for r in rows:
        kind = " VL" if r["vision"] else ""
        typer.echo(f"{r['id']:{id_width}s} {r['num_parameters'] / 1e9:7.2f} B {r['num_layers']:3d} layers {r['model_type']}{kind}")
    typer.echo(f"\n{len(rows)} shipped (VL: vision-language). Any Hub id, HF-cache entry or folder with a\n"
               "config.json works too.")
    return 0


def models_command(
    model: str | None = MODEL_ARGUMENT,
    revision: str | None = REVISION_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List the shipped models, or show one model (any Hub id, cache entry or local folder):
    parameters, layers, KV-cache bytes per token, vision tokens per image, where it was found."""
    run_guarded(lambda: _list(as_json) if model is None else _show(model, revision, as_json))


def register(app: typer.Typer) -> None:
    app.command("models")(models_command)
