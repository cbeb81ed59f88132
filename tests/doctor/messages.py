"""The message corpus in tests/doctor/messages: every standard out-of-memory message of PyTorch,
vLLM, Ray, the Linux kernel, the shells and launchers that report a SIGKILL, and NCCL, written as
TEMPLATES from the printers' own sources (each entry names its file and version), never copied
from a user's report.

An entry's ``template`` holds ``{key}`` placeholders filled from ``values``; ``key`` is the number
the doctor must read back (``{label_x}``: the label ``x``). Sizes carry their printed unit, or the
entry's ``units`` says which unit the printer puts after the number. ``shortened`` lists the
fragments users paste (elided parts as "..."); ``raised_as`` is the exception class, for the
Ray-task wrapper. The expected bytes are computed here, independently of `oomless.doctor.sizes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Callable

import yaml

MESSAGES = Path(__file__).parent / "messages"
PLACEHOLDER = re.compile(r"\{(\w+)\}")
BINARY_UNITS = {"B": 1, "bytes": 1, "KiB": 2**10, "kB": 2**10, "MiB": 2**20, "GiB": 2**30, "GB": 2**30}
"""Every printer here prints binary units whatever the label (Ray's GB and the kernel's kB
included): node_manager.cc divides by 1024 three times, mm/oom_kill.c shifts pages by PAGE_SHIFT - 10."""
_SIZE = re.compile(r"^([\d.]+)\s*([A-Za-z]*)$")


@dataclass(frozen=True)
class Entry:
    id: str
    source: str
    kind: str
    variant: str
    device: str
    phase: str | None
    template: str
    values: dict[str, Any]
    units: dict[str, str]
    shortened: tuple[str, ...]
    raised_as: str | None
    fixed_numbers: dict[str, Any]
    fixed_labels: dict[str, str]

    def render(self, template: str | None = None) -> str:
        return PLACEHOLDER.sub(lambda m: str(self.values[m.group(1)]), self.template if template is None else template)

    def expected(self, template: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
        """Numbers and labels the doctor must read from ``template`` (the whole message by default)."""
        keys = PLACEHOLDER.findall(self.template if template is None else template)
        numbers = {k: self._number(k) for k in keys if not k.startswith("label_")}
        labels = {k[len("label_"):]: str(self.values[k]) for k in keys if k.startswith("label_")}
        return numbers, labels

    def _number(self, key: str) -> int | float:
        value = self.values[key]
        if not key.endswith("_bytes"):
            return value
        number, unit = _SIZE.match(str(value)).groups()
        factor = BINARY_UNITS[unit or self.units[key]]
        return int((Decimal(number) * factor).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def load() -> list[Entry]:
    out = []
    for path in sorted(MESSAGES.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text(encoding="utf-8")):
            expect = raw["expect"]
            out.append(Entry(
                id=raw["id"], source=raw["source"], kind=expect["kind"], variant=expect["variant"],
                device=expect["device"], phase=expect.get("phase"), template=raw["template"],
                values=dict(raw.get("values") or {}), units=dict(raw.get("units") or {}),
                shortened=tuple(raw.get("shortened") or ()), raised_as=raw.get("raised_as"),
                fixed_numbers=dict(expect.get("numbers") or {}), fixed_labels=dict(expect.get("labels") or {}),
            ))
    return out


# --- wrappers: how the messages reach a user's log -------------------------------------------------


def _each_line(prefix: str) -> Callable[[str], str]:
    return lambda text: "\n".join(prefix + line for line in text.split("\n"))


RAY_TASK_TRACEBACK = (
    "ray.exceptions.RayTaskError({cls}): ray::WorkerDict.actor_rollout_compute_log_prob() (pid=51234, ip=10.8.0.3, "
    "actor_id=3f9c1e0d2b7a4c5e, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f3a2c1b5d90>)\n"
    '  File "/opt/verl/verl/single_controller/ray/base.py", line 663, in func\n'
    "    return getattr(self.worker_dict[key], name)(*args, **kwargs)\n"
    '  File "/opt/verl/verl/workers/fsdp_workers.py", line 912, in compute_log_prob\n'
    "    output, entropys = self.actor.compute_log_prob(data=data, calculate_entropy=True)\n"
    "{message}"
)
"""A RayTaskError as python/ray/exceptions.py prints it (class "RayTaskError(<cause>)", the
worker's title and pid, then the cause's traceback with Ray's internal frames dropped), raised in
verl's log-prob step (verl/workers/fsdp_workers.py `compute_log_prob`)."""
RAY_TASK_PHASE = "logprob"

WRAPPERS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "torchrun_rank": _each_line("[rank3]: "),
    "ray_actor": _each_line("(WorkerDict pid=51234, ip=10.8.0.3) "),
    "ansi_colours": lambda text: "\n".join(f"\x1b[36m(WorkerDict pid=51234)\x1b[0m \x1b[31m{line}\x1b[0m" for line in text.split("\n")),
    "vllm_logger": _each_line("(EngineCore_DP0 pid=9021) ERROR 11-27 02:44:56 [core.py:718] "),
    "dmesg": _each_line("[ 9021.500112] "),
}
"""Per-line prefixes of torchrun (`--tee`'s "[rankN]:"), Ray's log forwarding ("(Actor pid=N,
ip=…)", coloured by python/ray/_private/log_monitor), vLLM's engine-core logger
(vllm/logging_utils/formatter.py repeats the prefix on every line), dmesg's timestamp."""


def ray_task_wrapped(entry: Entry, text: str) -> str:
    return RAY_TASK_TRACEBACK.format(cls=entry.raised_as, message=text)
