"""What people read: terminal tables, the live display, the Markdown and HTML reports."""

from coordinator.views.html import render_html
from coordinator.views.live import LiveBoard
from coordinator.views.markdown import render_markdown
from coordinator.views.terminal import report_view, runs_table

__all__ = ["LiveBoard", "render_html", "render_markdown", "report_view", "runs_table"]
