"""A placeholder reward rubric: the peer's manifest must name one; memory estimation never runs it."""


def reward(*args: object, **kwargs: object) -> float:
    return 0.0
