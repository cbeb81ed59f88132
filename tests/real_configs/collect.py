"""Copy the RL example configs of each framework into tests/real_configs/ and write manifest.yaml.

Usage (needs bare git mirrors of the repositories, e.g. from `git clone --mirror`):
    python tests/real_configs/collect.py --mirrors /work/.mirror

A mirror of `owner/name` is looked up as `MIRRORS/owner+name/repo` or `MIRRORS/owner+name`.
What is copied is declared in `sources.yaml` (`extras`: files copied beside the entries, not
planned themselves, e.g. the setup.py whose pins a launch reads); hand-read hardware (with the quote that says
it) in `hardware.yaml`, merged into the manifest by entry id (a `launch` there names the
corpus file, e.g. a README command, that runs the entry: it is planned in the entry's place). Files are copied verbatim under
`<framework>/<version>/<path in the repository>`, so a script's own relative paths
(`config=examples/config.yaml`, `--config_file recipes/accelerate_configs/zero3.yaml`) resolve
from the version folder as they do from the repository root. A command cut out of a document
or docstring is `<path>.L<first>-<last>.sh`, its lines recorded in the manifest.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COMMAND_START = re.compile(r"^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(accelerate launch|trl (?:grpo|rloo|ppo)|torchrun|python3? |sbatch )")
PATH_TOKEN = re.compile(r"[\w.${}/-]+\.(?:ya?ml|json)")
PLACEHOLDER = re.compile(r"\.\.\.|<[a-z_ ]+>|\{[a-z_]+\}")
"""Commands with a placeholder (`--model_name_or_path ...`, `<model_name>`, `{model_name}`) are not configs."""
SKIP = re.compile(r"\b(sft|dpo|kto|orpo|reward_modeling)\b", re.IGNORECASE)


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], capture_output=True, text=True, check=True).stdout


def mirror_of(mirrors: Path, repo: str) -> Path:
    base = mirrors / repo.replace("/", "+")
    return base / "repo" if (base / "repo").exists() else base


def commands(text: str) -> list[tuple[int, int]]:
    """(first, last) 1-based line numbers of each shell command with its continuation lines. A
    command is matched on its whole logical line, so `VAR=x \\` on a line of its own before
    `accelerate launch ...` (open-r1's README) counts as the command's start."""
    lines, found, i = text.splitlines(), [], 0
    while i < len(lines):
        end = i
        while end + 1 < len(lines) and lines[end].rstrip().endswith("\\"):
            end += 1
        logical = " ".join(line.rstrip().removesuffix("\\") for line in lines[i:end + 1])
        if COMMAND_START.match(logical):
            found.append((i + 1, end + 1))
        i = end + 1
    return found


def small(mirror: Path, commit: str, path: str, limit: int = 64_000) -> bool:
    """A config-sized file that the mirror holds (data sets and absent large files are skipped)."""
    done = subprocess.run(["git", "-C", str(mirror), "cat-file", "-s", f"{commit}:{path}"], capture_output=True, text=True)
    return done.returncode == 0 and int(done.stdout) <= limit


def companions(text: str, path: str, tree: set[str]) -> list[str]:
    """Repository files a config names by a path that exists at this version."""
    found = []
    for token in PATH_TOKEN.findall(text):
        token = token.split("=")[-1].lstrip("./")
        for candidate in (token, str(Path(path).parent / token)):
            if candidate in tree and candidate != path and candidate not in found:
                found.append(candidate)
    return found


def select(paths: list[str], source: dict, version: dict) -> list[str]:
    chosen = [p for p in paths if any(fnmatch.fnmatch(p, pat) for pat in source.get("files", []))]
    chosen = [p for p in chosen if not any(fnmatch.fnmatch(p, pat) for pat in source.get("exclude", []) + version.get("exclude", []))]
    chosen = [p for p in chosen if not SKIP.search(Path(p).name)]
    if "pick" in source:
        chosen = [p for p in chosen if Path(p).name in source["pick"]]
    return sorted(chosen)


def spread(paths: list[str]) -> list[str]:
    """Round-robin over folders (first file of each folder, then the second, ...), so a cap
    keeps a spread; a framework's shared config.yaml comes first."""
    folders: dict[str, list[str]] = {}
    for path in paths:
        folders.setdefault(str(Path(path).parent), []).append(path)
    order = sorted(paths, key=lambda p: (not p.endswith("config.yaml"), folders[str(Path(p).parent)].index(p), p))
    return order


def collect_version(mirror: Path, name: str, source: dict, version: dict) -> list[dict]:
    framework = source.get("framework", name)
    commit = git(mirror, "rev-parse", f"{version['ref']}^{{commit}}").strip()
    tree = set(git(mirror, "ls-tree", "-r", "--name-only", commit).splitlines())
    root = HERE / name / version["label"]
    entries: list[dict] = []

    pending: list[tuple[str, str, str, tuple[int, int] | None]] = []

    def add(rel: str, text: str, path: str, lines: tuple[int, int] | None) -> None:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        extra = [c for c in companions(text, path, tree) if small(mirror, commit, c)]
        for other in extra:
            (root / other).parent.mkdir(parents=True, exist_ok=True)
            (root / other).write_text(git(mirror, "show", f"{commit}:{other}"), encoding="utf-8")
        entry = {"id": f"{name}/{version['label']}/{rel}", "framework": framework, "repo": source["repo"],
                 "path": path, "commit": commit, "version": version["label"], "file": f"{name}/{version['label']}/{rel}",
                 "root": f"{name}/{version['label']}"}
        if lines:
            entry["lines"] = list(lines)
        if extra:
            entry["companions"] = extra
        entries.append(entry)

    for path in spread(select(sorted(tree), source, version)):
        pending.append((path, git(mirror, "show", f"{commit}:{path}"), path, None))
    pattern = re.compile(source.get("snippet_match", "."), re.IGNORECASE)
    for path in source.get("snippets", []):
        if path not in tree:
            continue
        text = git(mirror, "show", f"{commit}:{path}")
        all_lines = text.splitlines()
        for first, last in commands(text):
            block = "\n".join(all_lines[first - 1:last]) + "\n"
            if pattern.search(block) and not SKIP.search(block) and re.search(r"--(config|model_name_or_path)\b|slurm/train\.slurm", block) \
                    and not PLACEHOLDER.search(block):
                pending.append((f"{path}.L{first}-{last}.sh", block, path, (first, last)))
    for item in pending[: source.get("per_version", 40)]:
        add(*item)
    for path in sorted(tree):  # files a launch reads without naming them (open-r1's setup.py pins, accelerate configs)
        if any(fnmatch.fnmatch(path, pat) for pat in source.get("extras", [])) and small(mirror, commit, path):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(git(mirror, "show", f"{commit}:{path}"), encoding="utf-8")
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, required=True)
    args = parser.parse_args()
    sources = yaml.safe_load((HERE / "sources.yaml").read_text(encoding="utf-8"))["frameworks"]
    hardware_file = HERE / "hardware.yaml"
    hardware = yaml.safe_load(hardware_file.read_text(encoding="utf-8")) if hardware_file.exists() else {}
    manifest = []
    for name, source in sources.items():
        mirror = mirror_of(args.mirrors, source["repo"])
        for version in source["versions"]:
            manifest.extend(collect_version(mirror, name, source, version))
    for entry in manifest:
        match = next((hw for pattern, hw in (hardware or {}).items() if fnmatch.fnmatch(entry["id"], pattern)), None)
        if match:
            entry["hardware"] = match
            launch = match.get("launch")
            if launch and not (HERE / entry["root"] / launch).is_file():
                raise SystemExit(f"hardware.yaml: {entry['id']}: launch {launch!r} is not a corpus file of {entry['root']}")
    header = "# Generated by tests/real_configs/collect.py from sources.yaml and hardware.yaml; do not edit.\n"
    text = yaml.safe_dump({"entries": manifest}, sort_keys=False, width=120, allow_unicode=True)
    (HERE / "manifest.yaml").write_text(header + text, encoding="utf-8")
    print(f"{len(manifest)} entries")


if __name__ == "__main__":
    main()
