"""Job functions for the RQ test (imported by `rq worker`)."""


def multiply(x, y):
    return x * y


def fail_always():
    raise ValueError("boom")
