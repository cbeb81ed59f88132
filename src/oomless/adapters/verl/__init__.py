"""verl (Hydra YAML and dotted overrides): `reader` (config → spec), `writer` (spec → config), keys (every key of ppo_trainer with its default, generated).

The reader never imports the writer; the writer may read its own output back through the reader."""

from .reader import SUPPORTED_VERSIONS, import_config
from .sources import SPEC_SOURCES
from .writer import export_spec

__all__ = ["SPEC_SOURCES", "SUPPORTED_VERSIONS", "export_spec", "import_config"]
