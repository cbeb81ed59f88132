"""`fit --export FW`: the fitted spec as the framework's files, written even when some of its
values have no native key — those are named in one message instead of failing on the first.

The files are the writer's `render_files` (inside `common.collect_unexpressed`), read back by
the framework's own reader and compared field by field with the spec (GPU type, capacity and
host RAM are the spec's; the GPU counts the files give are compared).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import common as C
from ..round_trip import all_differences, same_spec_dict, unstated_releases, value_at
from . import unexpressed_message, value_text, writer


def export_fitted(framework: str, spec: Any, arch: Any, out_dir: Path) -> tuple[list[Path], str | None]:
    """Write the files into ``out_dir`` (all or none, never over an existing file); the message
    naming every field they do not say, or None."""
    from .. import HardwareFlags, canonical, import_native
    from ...errors import InputError
    from ...spec.load import parse_spec

    module = writer(framework)
    with C.collect_unexpressed() as found:
        files = module.render_files(spec)
    paths = C.write_new_files({out_dir / name: text for name, text in files.items()}, False)
    hardware = HardwareFlags(gpu=spec.hardware.gpu or "A100-80GB", gpus_per_node=spec.hardware.gpus_per_node,
                             num_nodes=spec.hardware.num_nodes, host_ram_gib=spec.hardware.host_ram_gib)
    problems = list(dict.fromkeys(found))
    try:
        imported = import_native(canonical(framework), out_dir / module.MAIN_FILE, hardware).spec
        imported["hardware"] = {**spec.hardware.model_dump(exclude_none=True),
                                **{k: imported["hardware"][k] for k in ("gpus_per_node", "num_nodes") if k in imported.get("hardware", {})}}
        got = parse_spec(imported)
    except InputError as err:
        problems.append((err.field, f"the written files do not read back: {err.message}"))
        return paths, unexpressed_message(framework, tuple(problems))
    wanted, have = same_spec_dict(spec, arch), same_spec_dict(got, arch)
    unstated_releases(wanted, have)
    listed = {field for field, _ in problems}
    problems += [(f, f"wanted {value_text(value_at(wanted, f))}, the files give {value_text(value_at(have, f))}")
                 for f in all_differences(wanted, have) if f not in listed]
    return paths, unexpressed_message(framework, tuple(problems))
