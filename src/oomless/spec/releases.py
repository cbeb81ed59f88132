"""Whether a framework release the spec names falls in a range a behaviour has (PEP 440, by
`packaging`, imported only when a spec names a release)."""

from __future__ import annotations


def in_releases(version: str | None, specifier: str) -> bool:
    """True when ``version`` is in ``specifier`` (">=0.7.0,<0.8.0"); False when unknown or not
    a release number."""
    if not version:
        return False
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) in SpecifierSet(specifier)
    except InvalidVersion:
        return False
