"""Open-Reasoner-Zero (playground experiment files, read with ast): `reader` (config → spec), `writer` (spec → config), keys (ppo_base_exp defaults).

The reader never imports the writer; the writer may read its own output back through the reader."""

from .keys import SPEC_SOURCES
from .reader import SUPPORTED_VERSIONS, import_config
from .writer import export_spec

__all__ = ["SPEC_SOURCES", "SUPPORTED_VERSIONS", "export_spec", "import_config"]
