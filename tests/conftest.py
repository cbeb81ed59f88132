"""Test-wide environment: no test reaches the Hugging Face Hub, and none reads the developer's
own HF cache. Hub behaviour is tested against a local fake (tests/catalog/fake_hub.py) by the
tests that opt in; subprocesses started by CLI tests inherit this environment."""

from __future__ import annotations

import os
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp(prefix="oomless-empty-hf-cache-")
os.environ.pop("HF_ENDPOINT", None)
