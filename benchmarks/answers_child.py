"""Questions asked of one indexed folder, as ``fanout ask QUESTION --docs DIR`` asks them.

``python -m benchmarks.answers_child FOLDER STORE_DIR auto|off`` reads a JSON list of
questions on stdin and prints, per question, ``{paths, answer, claims, outcome}``: the
documents ``docs.search`` returned (in order), the answer's text, and whether the report
claims the question covered (outcome ``complete``). ``off`` asks with the semantic part
turned off (``FANOUT_SEMANTIC=off``, as ``docs.semantic: off`` does).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def main(argv: list[str]) -> None:
    """Ask every question of stdin; print the results as one JSON line."""
    folder, store_dir, semantic = argv[:3]
    if semantic == "off":
        os.environ["FANOUT_SEMANTIC"] = "off"
    import anyio

    from coordinator.api.run import ask

    questions: list[str] = json.loads(sys.stdin.read())
    store = os.path.join(store_dir, "runs.sqlite")
    out: list[dict[str, Any]] = []

    async def each() -> None:
        for question in questions:
            report = await ask(question, tools=[f"docs:{folder}"], store=store)
            wire = report.to_wire()
            paths: list[str] = []
            match: Any = None
            for section in wire["answer"]["sections"]:
                for finding in section.get("findings", []):
                    data = finding.get("data")
                    if isinstance(data, dict):
                        paths += [r["path"] for r in data.get("results", [])
                                  if isinstance(r, dict) and "path" in r]
                        match = data.get("match", match)
            out.append({"paths": paths, "answer": wire["answer"].get("text") or "",
                        "claims": wire["outcome"] == "complete", "outcome": wire["outcome"],
                        "match": match})

    anyio.run(each)
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
