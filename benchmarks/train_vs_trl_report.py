"""The markdown page of `train_vs_trl.py`'s results (benchmarks/results/train-vs-trl.md).

Every figure on the page is read from the results document; the sentences that say which run
holds less memory, and by how much, are worked out from those figures, not written in.
"""

from __future__ import annotations

import json
from typing import Any

from oomless.units import format_bytes

BYTES_PER_PARAMETER_TRAINED = 4 + 4 + 8
"""fp32 weight + fp32 gradient + AdamW's two fp32 moments (exp_avg, exp_avg_sq): what every
trained parameter holds at the optimizer step of a CPU run (TRL on CPU trains in fp32).
Source: torch 2.13 `torch/optim/adamw.py` (state `exp_avg`, `exp_avg_sq` like the parameter)."""
TRL_LOGPROB_TILE_ROWS_MAX = 4096
"""Positions per tile of TRL's chunked log-prob kernel. Source: trl 1.16.0
`trl/kernels/chunked_logprob.py` (`TOKEN_CHUNK_SIZE`, `mm_buf` of min(N, 4096) × chunk_size)."""


def _mib_diff(a: int, b: int) -> str:
    return format_bytes(abs(a - b))


def memory_verdict(row: dict[str, Any]) -> str:
    """Which run holds less peak live tensor memory at this row's vocabulary, and by how much."""
    trl, ours = row["results"]["trl_defaults"]["peak_bytes"], row["results"]["oomless"]["peak_bytes"]
    ratio = ours / trl
    if ours == trl:
        return "the same peak in both runs"
    lower, by = ("oomless", 1 - ratio) if ours < trl else ("TRL's defaults", ratio - 1)
    return (f"lower peak: **{lower}**, by {_mib_diff(ours, trl)} ({100 * by:.1f} % of TRL's peak; "
            f"oomless/TRL = {ratio:.3f}×)")


def time_verdict(row: dict[str, Any]) -> str:
    wall, cpu = row["step_time_ratio"], row.get("step_cpu_time_ratio")
    text = f"oomless/TRL median step time {wall:.3f}× wall"
    return text + (f", {cpu:.3f}× CPU time" if cpu is not None else "")


def _row_lines(row: dict[str, Any]) -> list[str]:
    lines = []
    for side in ("trl_defaults", "oomless"):
        v = row["results"][side]
        per_repeat = ", ".join(f"{x * 1000:.0f}" for x in v["median_step_seconds_per_repeat"])
        cpu = v.get("median_step_cpu_seconds")
        lines.append(
            f"| {row['vocab_size']:,} | {side} | {v['num_parameters']:,} | {format_bytes(v['peak_bytes'])} "
            f"({v['peak_bytes']:,} B) | {format_bytes(v['max_rss_bytes'])} | {v['median_step_seconds'] * 1000:.0f} ms "
            f"({per_repeat}) | {'' if cpu is None else f'{cpu * 1000:.0f} ms'} | {v['logprob_chunk']:,} |"
        )
    return lines


def _model_line(row: dict[str, Any]) -> str:
    m = row["model"]
    return (f"- vocabulary {row['vocab_size']:,}: Qwen2ForCausalLM, hidden {m['hidden_size']}, intermediate "
            f"{m['intermediate_size']}, {m['num_hidden_layers']} layers, {m['num_attention_heads']} heads / "
            f"{m['num_key_value_heads']} KV heads, tied embeddings {str(m['tie_word_embeddings']).lower()}, random "
            f"weights; tokenizer {m['tokenizer']} with {m['tokenizer_entries']:,} entries (pad id {m['pad_token_id']}, "
            f"eos id {m['eos_token_id']}).")


def _why_row(row: dict[str, Any]) -> str:
    trl, ours = row["results"]["trl_defaults"], row["results"]["oomless"]
    trained = ours["num_parameters"] * BYTES_PER_PARAMETER_TRAINED
    phases = ", ".join(f"{k} {format_bytes(v)}" for k, v in sorted((ours.get("peak_by_phase") or {}).items()))
    chunks = (f"the same {trl['logprob_chunk']:,} columns in both runs" if trl["logprob_chunk"] == ours["logprob_chunk"]
              else f"{trl['logprob_chunk']:,} columns in TRL's run, {ours['logprob_chunk']:,} in oomless's")
    kernels = "; ".join(
        f"tile {k['chunk']:,}: {format_bytes(k['forward_bytes'])} forward, {format_bytes(k['forward_backward_bytes'])} "
        f"forward + backward" for k in row.get("logprob_kernel", []))
    widest = max(row.get("logprob_kernel", []), key=lambda k: k["chunk"], default=None)
    kernel_text = (f" TRL's log-prob kernel alone on {widest['positions']:,} positions (one step's), bytes above its "
                   f"inputs: {kernels}; at TRL's tile that is {100 * widest['forward_backward_bytes'] / trl['peak_bytes']:.0f} % "
                   "of TRL's peak." if widest else "")
    same = row.get("oomless_with_trl_checkpointing")
    checkpoint_text = "" if not same else (
        f" The same oomless run with gradient checkpointing {str(same['gradient_checkpointing']).lower()} (TRL's setting, "
        f"{same['num_steps']} steps) peaks at {format_bytes(same['peak_bytes'])} ({same['peak_bytes']:,} B, "
        f"{same['peak_bytes'] - trl['peak_bytes']:+,} B against TRL's), so checkpointing accounts for "
        f"{format_bytes(ours['peak_bytes'] - same['peak_bytes'])} of the difference.")
    return (f"- **{row['vocab_size']:,} tokens**: log-prob tile {chunks}. Weights, gradients and AdamW moments of "
            f"{ours['num_parameters']:,} parameters: {format_bytes(trained)} ({BYTES_PER_PARAMETER_TRAINED} B each), "
            f"{100 * trained / trl['peak_bytes']:.0f} % of TRL's peak and {100 * trained / ours['peak_bytes']:.0f} % of "
            f"oomless's.{kernel_text} oomless's peak by phase: {phases}. Result: {memory_verdict(row)}.{checkpoint_text}")


def _vocabulary_share(row: dict[str, Any]) -> float:
    """Embedding (and the LM head when untied) as a share of the model's parameters."""
    m = row["model"]
    matrices = 1 if m["tie_word_embeddings"] else 2
    return matrices * row["vocab_size"] * m["hidden_size"] / row["results"]["oomless"]["num_parameters"]


def _spilled(rows: list[dict[str, Any]]) -> str:
    spilled = [(r["vocab_size"], r["results"]["oomless"].get("spilled_bytes_per_rollout")) for r in rows]
    if any(b is None for _, b in spilled):
        return ""
    return " (" + ", ".join(f"{format_bytes(b)} at {n:,} tokens" for n, b in spilled) + ")"


def _discussion(rows: list[dict[str, Any]], versions: dict[str, str]) -> str:
    big = max(rows, key=lambda r: r["vocab_size"])
    small = min(rows, key=lambda r: r["vocab_size"])
    gap = abs(big["memory_ratio"] - 1)
    lines = [
        "- TRL 1.16 scores completions through `trl/kernels/chunked_logprob.py`: the LM head runs in tiles of "
        f"min(positions, {TRL_LOGPROB_TILE_ROWS_MAX:,}) × 32,768 logits, so the [positions × vocabulary] logits never exist "
        "whole, in either run. On a CPU each tile's log-softmax runs as torch ops (the Triton kernel needs a GPU), so "
        "forward and backward hold several tile-sized temporaries at once (the kernel figures above); with Triton (a "
        "GPU) the kernel folds each tile in place in its one buffer (the kernel's docstring), so a GPU run's "
        "transient is smaller than this CPU run's.",
        "- Below 32,768 tokens the tile is wider than the vocabulary; `oomless train` narrows it to the vocabulary "
        "(`oomless.train.session.fit_logprob_chunk_to_vocabulary`). That is where the small-vocabulary saving comes "
        "from, and it is a small-vocabulary effect: from 32,768 tokens up the tile is the same in both runs.",
        "- oomless's other memory choices: optimizer states spilled to a file during rollout (a lower rollout phase, "
        "not a lower peak: the training phase holds weights, gradients and AdamW moments in both runs) and no "
        "gradient checkpointing (the spec's choice; it keeps activations that TRL's default recomputes"
        + (f"; the whole {small['vocab_size']:,}-token oomless peak, all activations included, is "
           f"{format_bytes(small['results']['oomless']['peak_bytes'])}" if small is not big else "") + ").",
    ]
    if small is not big:
        lines.append(
            f"- At {big['vocab_size']:,} tokens the embedding{'' if big['model']['tie_word_embeddings'] else ' and LM head'} "
            f"are {100 * _vocabulary_share(big):.1f} % of the model's parameters, so this row measures the vocabulary "
            f"terms: {memory_verdict(big)}" + (
                " — within 5 %, so at a real vocabulary oomless's trainer saves nothing over TRL's defaults at the same "
                "batch; what it adds there is the plan, the per-phase telemetry and the out-of-memory re-split, not a "
                "lower peak." if gap < 0.05 else "."))
    lines += [
        "- What this does not show: a real Qwen2.5-0.5B also has 0.36B non-embedding parameters (its model card), "
        "whose activations and checkpointing this 2-layer, hidden-64 model barely exercises; the ratio says the "
        "log-prob path saves nothing at a real vocabulary, not what a whole real model's ratio would be.",
        "- Step times: the machine is shared (load averages above) and the runs are `nice`d, so wall times swing "
        "between repeats; CPU time per step is the steadier figure. Both sides include the live-bytes tracker; "
        "oomless's also its per-phase telemetry and the spill of optimizer states to a file and back at every "
        "rollout" + _spilled(rows) + ".",
        "- Tokenizer: the character tokenizer of `oomless.train.tiny` (a `tokenizers` WordLevel model) widened with "
        "filler entries to the vocabulary, saved in a folder of its own and named by the spec's `train.tokenizer`. "
        f"Saved beside a qwen2 config.json, transformers {versions.get('transformers', '5')}'s `AutoTokenizer` would load it as a byte-level BPE "
        "`Qwen2Tokenizer` with `<|endoftext|>` added one past the vocabulary (vocab_size + 1 entries).",
    ]
    return "\n".join(lines)


def _repeat_peaks(rows: list[dict[str, Any]]) -> str:
    per_repeat = [v.get("peak_bytes_per_repeat") for row in rows for v in row["results"].values()]
    if any(p is None for p in per_repeat):
        return "peak bytes per repeat not recorded"
    if all(len(set(p)) == 1 for p in per_repeat):
        return "peak bytes were identical in every repeat"
    spread = max((max(p) - min(p)) / max(p) for p in per_repeat)
    return f"peak bytes differed between repeats by up to {100 * spread:.2f} %; the table shows the kept run's"


def _batch_line(config: dict[str, Any]) -> str:
    b, n = config.get("batch"), config.get("lengths")
    if not b or not n:
        return "as in the spec"
    step = b["micro_batch_size"] * b["gradient_accumulation_steps"]
    return (f"micro-batch {b['micro_batch_size']} × gradient accumulation {b['gradient_accumulation_steps']} = {step} "
            f"completions per optimizer step, {b['num_generations']} per prompt ({step // b['num_generations']} prompts); "
            f"at most {n['max_prompt_tokens']} prompt and {n['max_completion_tokens']} completion tokens")


def markdown(doc: dict[str, Any]) -> str:
    m, c, t = doc["machine"], doc["config"], doc["targets"]
    rows = doc["rows"]
    table = "\n".join(line for row in rows for line in _row_lines(row))
    summary = "\n".join(
        f"- vocabulary {row['vocab_size']:,}: {memory_verdict(row)} (target ≤ {t['memory_ratio_at_most']}×: "
        f"{'met' if row['met']['memory'] else '**missed**'}); peak RSS oomless/TRL {row['rss_ratio']:.3f}×; "
        f"{time_verdict(row)} (target ≤ {t['step_time_ratio_at_most']}× wall: {'met' if row['met']['step_time'] else '**missed**'})."
        for row in rows
    )
    load = f"{m['load_average_before']} before, {m['load_average_after']} after"
    return f"""# `oomless train` vs TRL defaults, at the example's vocabulary and at Qwen's (tiny-arith, CPU)

Reproduce: `{doc['command']}` (writes this file and `train-vs-trl.json`; took {doc['seconds']:.0f} s).
Re-render this page from the JSON: `.venv/bin/python benchmarks/train_vs_trl.py --render benchmarks/results/train-vs-trl.json`.

Machine: {m['platform']}, {m['cpu_count']} CPUs shared with other jobs (load average over 1/5/15 min: {load}),
Python {m['python']}, torch threads {m['torch_threads']}.
Versions: {', '.join(f'{k} {v}' for k, v in doc['versions'].items())}.
Task: `{c['spec']}` (GRPO on single-digit addition), the same spec in every run but for the model's
`vocab_size` (the larger one is {c['real_vocab_from']}'s); {c['num_steps']} optimizer steps per run, median
step time after {c['warmup_steps']} warm-up steps, {c['repeats']} alternating runs per side and vocabulary, each
side keeping its fastest median ({_repeat_peaks(rows)}).
Models, built locally (no hub) once per vocabulary and shared by both sides:
{chr(10).join(_model_line(row) for row in rows)}
Batch and lengths, both sides: {_batch_line(c)}.
TRL's side as run: {json.dumps(rows[0]['trl_defaults_config'])}; oomless's side: the spec, gradient
checkpointing {str(c.get('gradient_checkpointing')).lower()}, the step's completions handed to TRL whole and split into the spec's micro-batches by oomless.

| vocabulary | run | parameters | peak live tensor bytes | peak RSS | median step, wall (per repeat, ms) | median step, CPU | log-prob tile columns |
|---:|---|---:|---:|---:|---:|---:|---:|
{table}

{summary}

## Where the difference comes from

Memory is the peak of live tensor bytes, counted by the same dispatch-level tracker in both
processes; peak RSS adds the Python heap, libraries and allocator caches.

{chr(10).join(_why_row(row) for row in rows)}

{_discussion(rows, doc['versions'])}
"""
