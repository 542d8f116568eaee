"""Privacy attacks on a release, one module per attack; each docstring states its attacker model."""
