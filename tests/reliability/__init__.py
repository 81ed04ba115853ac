"""Reliability: chaos properties, fuzzed inputs, kill-anywhere resume, the service under faults."""
