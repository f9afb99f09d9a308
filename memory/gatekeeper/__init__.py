"""GATED's gatekeeper: which turns hold durable facts, and the facts in canonical form with a category."""
