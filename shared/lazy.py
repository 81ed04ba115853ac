"""Lazy re-exports for a package's ``__init__`` (PEP 562): a name is imported on first use.

Every ``from coordinator.cli.main import main`` runs ``coordinator/__init__.py``,
``coordinator/cli/__init__.py`` and the ``__init__`` of every package on the way; one that
imported its submodules eagerly made every command load nearly all of fanout (pydantic
models, the engine, the store) before parsing its arguments. A package lists its public
names with the module each comes from instead::

    if TYPE_CHECKING:  # what type checkers and readers see
        from shared.budget import ContextDecision

    __getattr__ = lazy_exports(__name__, {"shared.budget": ("ContextDecision",)})

``shared.ContextDecision`` and ``from shared import ContextDecision`` work as before; the
submodule is imported the first time one of its names is asked for. A name that is also
a submodule's (``coordinator.lead.decompose``) is imported eagerly instead: importing the
submodule binds the module to the package under that name, and a lazy name would lose.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name of ``exports`` (module → the
    names it gives) is imported from its module when first asked for, then kept on the
    package, so later lookups are plain attribute reads."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
