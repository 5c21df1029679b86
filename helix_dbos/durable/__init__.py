"""The workflow side of helix: internal, import from ``helix_dbos``."""
