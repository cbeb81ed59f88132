"""Key tables of the frameworks oomless reads, generated from their own wheels (PyPI).

`dataclass_fields` reads dataclass fields with `ast` (no framework is imported), `sources`
says which files of which framework hold its keys, `ranges` merges the per-version tables into
one JSON per framework: key -> first and last version read, default, type. Entry point:
`scripts/native_flag_tables.py`.
"""
