"""An MCP server over stdio that answers ``tools/call`` with whatever its ``mode`` says.

Written without the SDK on purpose: it speaks just enough JSON-RPC to be started (an
honest ``initialize`` and ``tools/list``), then replies to each call with malformed
JSON, missing fields, wrong ids, wrong types, enormous texts, bytes that are not UTF-8,
silence, or a crash. Run as ``python hostile_mcp_server.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "reply",
    "description": "Answers as its mode says.",
    "inputSchema": {"type": "object", "properties": {"mode": {"type": "string"}},
                    "required": ["mode"]},
    "annotations": {"readOnlyHint": True, "idempotentHint": True},
}


def send(message: Any) -> None:
    """Write one JSON-RPC message as a line."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def raw(data: bytes) -> None:
    """Write raw bytes as a line."""
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def result(request_id: Any, value: Any) -> None:
    """Answer ``request_id`` with ``value`` as its result."""
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(request_id: Any, body: str, **extra: Any) -> None:
    """Answer with one text block."""
    result(request_id, {"content": [{"type": "text", "text": body}], **extra})


def deep(depth: int) -> Any:
    """A value nested ``depth`` lists deep."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def call(request_id: Any, mode: str) -> None:
    """Misbehave as ``mode`` says."""
    if mode == "ok":
        text(request_id, "fine")
    elif mode == "bad_json":
        raw(b'{"jsonrpc": "2.0", "id": ' + str(request_id).encode() + b', "result": {')
    elif mode == "not_utf8":
        raw(b"\xff\xfe\xfd")
    elif mode == "wrong_id":
        text(request_id + 1000 if isinstance(request_id, int) else "other", "lost")
    elif mode == "no_result":
        send({"jsonrpc": "2.0", "id": request_id})
    elif mode == "result_not_object":
        result(request_id, 5)
    elif mode == "content_not_list":
        result(request_id, {"content": "just text"})
    elif mode == "unknown_block":
        result(request_id, {"content": [{"type": "hologram", "data": 1}]})
    elif mode == "is_error_string":
        text(request_id, "failed?", isError="yes")
    elif mode == "structured_not_object":
        text(request_id, "x", structuredContent=[1, 2, 3])
    elif mode == "error_without_code":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"message": "no code"}})
    elif mode == "error_text_only":
        send({"jsonrpc": "2.0", "id": request_id, "error": "a string, not an object"})
    elif mode == "is_error_fanout":
        text(request_id, "quota", isError=True,
             structuredContent={"errorCategory": "nonsense", "isRetryable": "maybe",
                                "retry_after_s": "soon", "limit": {"deep": deep(50)}})
    elif mode == "huge_text":
        text(request_id, "x" * (8 << 20))
    elif mode == "deep_json":
        result(request_id, {"content": [], "structuredContent": {"v": deep(5000)}})
    elif mode == "flood":
        for n in range(5000):
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": n}})
        text(request_id, "after the flood")
    elif mode == "silence":
        return
    elif mode == "crash":
        sys.exit(3)
    else:
        text(request_id, f"unknown mode {mode}", isError=True)


def main() -> None:
    """Serve until stdin closes."""
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            result(request_id, {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            })
        elif method == "tools/list":
            result(request_id, {"tools": [TOOL]})
        elif method == "tools/call":
            call(request_id, str(message["params"]["arguments"].get("mode")))
        elif request_id is not None:
            result(request_id, {})


if __name__ == "__main__":
    main()
