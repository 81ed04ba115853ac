"""The packages import and expose their API."""

import shared
import subagents


def test_public_api_is_importable() -> None:
    """Every name in __all__ resolves."""
    for module in (shared, subagents):
        for name in module.__all__:
            assert getattr(module, name) is not None
