"""Documents read for the index: a folder's files, their text, their passages (DESIGN §10)."""

from subagents.research.documents.folder import SUFFIXES, Entry, scan, shown
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
]
