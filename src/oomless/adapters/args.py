"""Typed reading of parsed command-line flags, and transformers' optimizer names.

Used by the swift and trl adapters; any adapter reading HfArgumentParser-style flags may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..errors import InputError
from .common import single, to_bool, to_float, to_int


class FlagReader:
    """Typed access to parsed flags that remembers which were used, so the rest can be
    reported: ``ignore(name, why)`` for understood flags without a modelled effect, and
    ``leftover(no_effect)`` for the flags nobody read."""

    def __init__(self, flags: Mapping[str, Sequence[str]], framework: str) -> None:
        self._flags = {k: list(v) for k, v in flags.items()}
        self._used: set[str] = set()
        self._framework = framework
        self.ignored: list[str] = []

    def has(self, name: str) -> bool:
        return name in self._flags

    def peek(self, name: str) -> list[str] | None:
        """A flag's values without counting it as read (data the plan does not use itself)."""
        return self._flags.get(name)

    def raw(self, name: str) -> list[str] | None:
        if name not in self._flags:
            return None
        self._used.add(name)
        return self._flags[name]

    def str(self, name: str, default: str | None = None) -> str | None:
        values = self.raw(name)
        return default if values is None else single(name, values)

    def bool(self, name: str, default: bool) -> bool:
        values = self.raw(name)
        if values is None:
            return default
        return True if not values else to_bool(f"--{name}", single(name, values))

    def int(self, name: str, default: int | None = None, minimum: int | None = None) -> int | None:
        value = self.str(name)
        return default if value is None or value.lower() == "none" else to_int(f"--{name}", value, minimum)

    def float(self, name: str, default: float | None = None) -> float | None:
        value = self.str(name)
        return default if value is None or value.lower() == "none" else to_float(f"--{name}", value)

    def list(self, name: str, default: list[str] | None = None) -> list[str] | None:
        values = self.raw(name)
        return default if values is None else values

    def ignore(self, name: str, why: str) -> None:
        if self.raw(name) is not None:
            self.ignored.append(f"--{name}: {why}")

    def leftover(self, no_effect: frozenset[str] | set[str], not_modelled: Mapping[str, str] | None = None,
                 unknown: Callable[[str], str] | None = None) -> list[str]:
        """One line per unread flag: it changes memory in a way the spec cannot say (with why),
        it has no memory effect, or it is not understood (``unknown(name)`` says why, e.g. from
        the framework's key table)."""
        lines = list(self.ignored)
        for name in self._flags:
            if name in self._used:
                continue
            if not_modelled and name in not_modelled:
                why = f"affects memory, not modelled: {not_modelled[name]}"
            elif name in no_effect:
                why = "no effect on memory"
            elif unknown is not None:
                why = unknown(name)
            else:
                why = f"not understood (not a {self._framework} flag oomless knows)"
            lines.append(f"--{name}: {why}")
        return lines


HF_OPTIMIZERS: dict[str, str] = {
    **dict.fromkeys(("adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_apex_fused", "adamw_torch_xla",
                     "adamw_torch_npu_fused", "adam", "adamw"), "adamw"),
    **dict.fromkeys(("adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "adamw_torch_8bit", "adam8bit"),
                    "adamw_8bit"),
    "adafactor": "adafactor",
    "sgd": "sgd",
}
"""transformers `OptimizerNames` (and DeepSpeed optimizer types, lower-cased) → spec optimizer.
Source: transformers/training_args.py `OptimizerNames`, DeepSpeed config docs `optimizer.type`."""


def hf_optimizer(name: str, value: str) -> str:
    try:
        return HF_OPTIMIZERS[value.lower()]
    except KeyError:
        raise InputError(name, f"{value!r} is not planned; allowed: {', '.join(HF_OPTIMIZERS)}") from None
