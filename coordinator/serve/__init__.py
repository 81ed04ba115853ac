"""The HTTP service and its web page (docs/design.md §8): ``fanout serve``.

``create_app`` builds the FastAPI application over a run store; ``run_server`` serves
it on uvicorn; the run manager executes the submitted runs in the same process.
"""

from typing import TYPE_CHECKING

from shared.lazy import lazy_exports

if TYPE_CHECKING:
    from coordinator.serve.app import create_app, run_server
    from coordinator.serve.manager import RunManager
    from coordinator.serve.records import valid_run_id
    from coordinator.serve.server import (
        BindRefused,
        ServeConfig,
        ServeError,
        TokenError,
        bind_socket,
        check_bind,
        is_loopback,
        read_token,
        url_of,
    )

__all__ = [
    "BindRefused",
    "RunManager",
    "ServeConfig",
    "ServeError",
    "TokenError",
    "bind_socket",
    "check_bind",
    "create_app",
    "is_loopback",
    "read_token",
    "run_server",
    "url_of",
    "valid_run_id",
]

# Each name is imported from its module on first use (shared/lazy.py): importing one
# part of the package, or the package, loads nothing else.
__getattr__ = lazy_exports(__name__, {
    "coordinator.serve.app": ("create_app", "run_server"),
    "coordinator.serve.manager": ("RunManager",),
    "coordinator.serve.records": ("valid_run_id",),
    "coordinator.serve.server": (
        "BindRefused", "ServeConfig", "ServeError", "TokenError", "bind_socket", "check_bind",
        "is_loopback", "read_token", "url_of",
    ),
})
