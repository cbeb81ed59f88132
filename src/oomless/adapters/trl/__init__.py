"""TRL GRPO, RLOO and PPO (`trl grpo`, `trl rloo`, accelerate/torchrun/python launches of their scripts):
`reader` (config → spec; `trainers` says which trainer a launch runs, `ppo` reads PPOTrainer's
runs), `writer` (spec → config; `ppo_writer` for PPO), launch (accelerate and vLLM server settings).

The reader never imports the writer; the writer may read its own output back through the reader."""

from .keys import SPEC_SOURCES
from .reader import SUPPORTED_VERSIONS, import_config
from .writer import export_spec

__all__ = ["SPEC_SOURCES", "SUPPORTED_VERSIONS", "export_spec", "import_config"]
