"""A run's children: sub-agents, remote sub-agents, companions (internal)."""
