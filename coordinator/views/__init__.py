"""What people read: terminal tables, the live display, the Markdown and HTML reports."""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.views.html import render_html
    from coordinator.views.live import LiveBoard
    from coordinator.views.markdown import render_markdown
    from coordinator.views.terminal import report_view, runs_table

__all__ = ["LiveBoard", "render_html", "render_markdown", "report_view", "runs_table"]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.views.html": ("render_html",),
    "coordinator.views.live": ("LiveBoard",),
    "coordinator.views.markdown": ("render_markdown",),
    "coordinator.views.terminal": ("report_view", "runs_table"),
})
