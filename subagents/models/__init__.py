"""Model clients: Anthropic, OpenAI-compatible and scripted, behind one protocol (DESIGN §7)."""
