"""Memory over a run's steps: growth terms per step and checkpoint saves on top of the plan's
steady peaks (``growth``: the terms, pure; ``steps``: the host timeline of a plan)."""
