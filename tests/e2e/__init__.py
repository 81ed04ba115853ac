"""End-to-end: real jobs through the official SDKs against loopback servers, and the CLI."""
