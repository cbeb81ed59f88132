"""Write src/oomless/catalog/data/modelscope_aliases.json: ModelScope model ids → Hugging Face ids,
as ms-swift's model registry pairs them (`Model('LLM-Research/Meta-Llama-3.1-8B-Instruct',
'meta-llama/Meta-Llama-3.1-8B-Instruct')`), plus the Hub's renamed repositories the registry
still spells the old way.

ms-swift downloads from ModelScope unless `--use_hf true`, so its scripts name ModelScope ids;
oomless resolves models by Hugging Face id (cache, Hub, shipped catalog). The registry files are
parsed with `ast` (read as data, never imported or run), from a bare ms-swift mirror:

    .venv/bin/python scripts/modelscope_aliases.py --mirror /work/.mirror/modelscope+ms-swift/repo

Releases read: HEAD (swift/model/models/*.py) and v3.5.0 (swift/llm/model/model/*.py); where both
name a ModelScope id, HEAD wins.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "oomless" / "catalog" / "data" / "modelscope_aliases.json"
RELEASES = (("v3.5.0", "swift/llm/model/model"), ("HEAD", "swift/model/models"))
HUB_RENAMES = {
    # meta-llama renamed its Llama 3.1 repositories (the Hub redirects the old names): the model
    # cards live at meta-llama/Llama-3.1-8B-Instruct etc.; ms-swift's registry keeps the old ids.
    f"meta-llama/Meta-Llama-3.1-{size}{kind}": f"meta-llama/Llama-3.1-{size}{kind}"
    for size in ("8B", "70B", "405B") for kind in ("", "-Instruct")
}


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True, text=True).stdout


def pairs(source: str) -> dict[str, str]:
    """`Model(ms_id, hf_id, ...)` calls whose first two arguments are both strings."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Model"):
            continue
        args = [a.value if isinstance(a, ast.Constant) else None for a in node.args[:2]]
        if len(args) == 2 and all(isinstance(a, str) for a in args) and args[0] != args[1]:
            found[args[0]] = args[1]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True, help="bare git mirror of modelscope/ms-swift")
    args = parser.parse_args()
    aliases: dict[str, str] = {}
    sources = []
    for release, folder in RELEASES:
        commit = git(args.mirror, "rev-parse", release).strip()
        sources.append(f"modelscope/ms-swift {release} ({commit}) {folder}/*.py")
        for name in git(args.mirror, "ls-tree", "--name-only", f"{release}:{folder}").split():
            if name.endswith(".py"):
                aliases.update(pairs(git(args.mirror, "show", f"{release}:{folder}/{name}")))
    aliases = {ms: HUB_RENAMES.get(hf, hf) for ms, hf in sorted(aliases.items())}
    document = {"sources": sources, "hub_renames": HUB_RENAMES, "aliases": aliases}
    OUT.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{len(aliases)} ModelScope ids → {OUT}")


if __name__ == "__main__":
    main()
