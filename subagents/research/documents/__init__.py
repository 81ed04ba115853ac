"""Documents read for the index: a folder's files, their text, their passages
(docs/design.md §10)."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from subagents.research.documents.folder import SUFFIXES, Entry, scan, shown, twin_stem
    from subagents.research.documents.passages import (
        Passage,
        Sketches,
        same_text,
        signature,
        sketches,
        snippet,
    )
    from subagents.research.documents.reading import (
        DEFAULT_MAX_BYTES,
        Document,
        NotIndexed,
        read_file,
    )

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SUFFIXES",
    "Document",
    "Entry",
    "NotIndexed",
    "Passage",
    "Sketches",
    "read_file",
    "same_text",
    "scan",
    "shown",
    "signature",
    "sketches",
    "snippet",
    "twin_stem",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "subagents.research.documents.folder": ("SUFFIXES", "Entry", "scan", "shown",
                                            "twin_stem"),
    "subagents.research.documents.passages": (
        "Passage", "Sketches", "same_text", "signature", "sketches", "snippet",
    ),
    "subagents.research.documents.reading": (
        "DEFAULT_MAX_BYTES", "Document", "NotIndexed", "read_file",
    ),
})
