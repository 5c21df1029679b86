"""How a step's tool calls run (internal)."""
