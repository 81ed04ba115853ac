"""fanout as an MCP server (docs/design.md §16): ``fanout mcp``, over stdio or streamable HTTP.

Tools ``ask``, ``run_job``, ``get_report``, ``list_runs`` and ``cancel_run``; resources
``fanout://runs/{id}/report.md`` and ``.json``; a progress notification as each subtask
ends; ``notifications/cancelled`` or ``cancel_run`` cancels a run, whose partial report
is kept. A killed server's runs are resumed by the next one on the store as it starts.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.mcpserve.config import ArgumentRefused, DoorConfig
    from coordinator.mcpserve.door import Busy, Door
    from coordinator.mcpserve.render import RunAnswer
    from coordinator.mcpserve.server import build_server
    from coordinator.mcpserve.transport import serve_http, serve_stdio

__all__ = [
    "ArgumentRefused",
    "Busy",
    "Door",
    "DoorConfig",
    "RunAnswer",
    "build_server",
    "serve_http",
    "serve_stdio",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.mcpserve.config": ("ArgumentRefused", "DoorConfig"),
    "coordinator.mcpserve.door": ("Busy", "Door"),
    "coordinator.mcpserve.render": ("RunAnswer",),
    "coordinator.mcpserve.server": ("build_server",),
    "coordinator.mcpserve.transport": ("serve_http", "serve_stdio"),
})
