"""A fix in the crashed run's own framework keys (`--from`): the change as the writer's native
settings of the run before and after it (`adapters.patch.plan_patch`), read against the user's
file so the old value is the one it sets."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def native_lines(framework: str, path: Path, old_spec: Any, new_spec: Any) -> tuple[str, ...]:
    """Each change as the framework's flag/key with old → new, and one line naming what its
    file cannot say; () when the file cannot be read as the framework's (the spec keys stay)."""
    from ..adapters.patch import plan_patch, unexpressed_message
    from ..adapters.common import read_text
    from ..errors import InputError

    try:
        patch = plan_patch(framework, path, read_text(path), old_spec, new_spec)
    except InputError:
        return ()
    lines = tuple(c.shown for c in patch.changes)
    message = unexpressed_message(framework, patch.unexpressed)
    return lines + ((f"({message})",) if message else ())


def expressible_proposal(framework: str, path: Path, run: Any, proposal: Any) -> Any:
    """``proposal`` with its changes in the framework's keys; when the framework's file cannot
    say the best answer, the first alternative it can say in full (noted)."""
    import dataclasses

    from ..adapters.patch import plan_patch
    from ..adapters.common import read_text
    from ..errors import InputError
    from .fit_hook import proposal_of

    text = read_text(path)
    for rank, choice in enumerate([None, *proposal.alternatives]):
        candidate = proposal if choice is None else proposal_of(choice, proposal.margin_bytes, run)
        try:
            patch = plan_patch(framework, path, text, run.spec, candidate.spec)
        except InputError:
            continue
        if not patch.unexpressed and patch.changes:
            note = candidate.note if rank == 0 else (
                f"{framework} cannot say fit's best answer; this is its alternative #{rank}, which it can")
            return dataclasses.replace(candidate, native=tuple(c.shown for c in patch.changes), note=note)
    return dataclasses.replace(proposal, native=native_lines(framework, path, run.spec, proposal.spec))
