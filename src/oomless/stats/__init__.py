"""`oomless stats`: what a dataset holds (prompt lengths, images) as the spec's typical values
and percentiles (``read``: rows of local files and cached datasets; ``measure``: counts)."""
