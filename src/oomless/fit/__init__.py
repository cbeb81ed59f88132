"""`oomless fit`: the fastest configuration of a run that fits in memory with a safety margin.

Layout: `space` (the knobs, grouped into factors, and the math moves `--allow` unlocks),
`layouts` (rollout layouts and batch re-splits that keep the training maths), `probe` (the
fast evaluator: constraints and step times predicted by adding per-factor effects measured
with `make_plan`), `region_search` (best-first search of one region), `search` (regions, math
levels, and the re-check of every returned configuration by `make_plan` on the spec as it
would be written), `safety` (the memory-safety settings a crashed run had, which a safer-only
search must not lower silently), `maximize` (the largest value of one field that fits),
`report` (JSON), `write` (the new spec file).

Entry points: `search.fit_file(path, FitOptions(...)) -> FitResult`, `search.fit(run, raw,
base_dir, options)` and `maximize.maximize(run, raw, base_dir, path, options)`.
"""
