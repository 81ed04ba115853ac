"""Fan-out, routing on errorCategory, coverage gaps, answer assembly and the CLI."""

__all__: list[str] = []
