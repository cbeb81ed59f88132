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
    return (f"**{lower}** peaks lower, by {_mib_diff(ours, trl)} ({100 * by:.1f} % of TRL's peak; "
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
    return (f"- **{row['vocab_size']:,} tokens**: log-prob tile {chunks}. Weights, gradients and AdamW moments of "
            f"{ours['num_parameters']:,} parameters: {format_bytes(trained)} ({BYTES_PER_PARAMETER_TRAINED} B each), "
            f"{100 * trained / trl['peak_bytes']:.0f} % of TRL's peak and {100 * trained / ours['peak_bytes']:.0f} % of "
            f"oomless's. oomless's peak by phase: {phases}. Result: {memory_verdict(row)}.")


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
side keeping its fastest median (peak bytes do not change between repeats).
Models, built locally (no hub) once per vocabulary and shared by both sides:
{chr(10).join(_model_line(row) for row in rows)}
Both sides: {json.dumps(rows[0]['trl_defaults_config'])} (TRL's side as run; oomless takes the
same step batch whole and splits it into the spec's micro-batches itself).

| vocabulary | run | parameters | peak live tensor bytes | peak RSS | median step, wall (per repeat, ms) | median step, CPU | log-prob tile columns |
|---:|---|---:|---:|---:|---:|---:|---:|
{table}

{summary}

## Where the difference comes from

Memory is the peak of live tensor bytes (the same dispatch-level tracker in both processes);
peak RSS adds the Python heap, libraries and allocator caches, about equal in both.

{chr(10).join(_why_row(row) for row in rows)}

- TRL 1.16 scores every completion position through `trl/kernels/chunked_logprob.py`: one work
  buffer of min(positions, {TRL_LOGPROB_TILE_ROWS_MAX:,}) × 32,768 logits, and the LM head runs tile by tile, so the
  [positions × vocabulary] logits never exist whole, in either run. With a vocabulary under 32,768
  (the example's 17 tokens) that buffer is far wider than the vocabulary, and `oomless train` narrows
  it to the vocabulary: almost all of TRL's peak goes, which is why the small-vocabulary row shows
  a large saving. That saving is a small-vocabulary effect. At 151,936 tokens the tile is 32,768
  columns in both runs, the LM head, embedding and their gradients and AdamW moments dominate, and
  they are resident in both runs at the training peak.
- oomless's other memory choices: optimizer states spilled to a file during rollout (they lower
  the rollout phase, which is not the peak here), no gradient checkpointing (the spec's choice;
  at hidden size 64 the recomputed activations are a few MiB, so TRL's checkpointing saves little).
- So on a model whose memory is mostly its vocabulary, oomless's trainer saves nothing over TRL's
  defaults at the same batch; its value there is the plan, the per-phase telemetry and the
  out-of-memory re-split, not a lower peak. A real Qwen2.5-0.5B adds a 358M-parameter transformer
  body (activations, checkpointing) that this CPU benchmark does not have.
- Step times: this machine is shared (see the load average), so wall times swing between
  repeats; CPU time per step is the steadier figure. Both include the live-bytes tracker, and
  oomless's include its per-phase telemetry and the spill of optimizer states to a file and back.
- Tokenizer: the character tokenizer of `oomless.train.tiny`, widened with filler entries to the
  vocabulary and saved in a folder of its own (the spec's `train.tokenizer`). Saved beside a
  qwen2 config.json, transformers 5.23's `AutoTokenizer` would load it as a byte-level BPE
  `Qwen2Tokenizer` with `<|endoftext|>` added one past the vocabulary (vocab_size + 1 entries).
"""
