"""Celery application for test_frameworks.py: broker and result backend from CELERY_REDIS_URL."""

import os

import redis
from celery import Celery

URL = os.environ["CELERY_REDIS_URL"]
app = Celery("cairn_fw", broker=URL, backend=URL)
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    result_expires=600,
)


@app.task
def add(x, y):
    return x + y


@app.task
def tsum(values):
    return sum(values)


@app.task(bind=True, max_retries=5)
def flaky(self, key):
    # Fails its first two runs; the attempt count lives in the server so it survives retries.
    attempt = redis.Redis.from_url(URL).incr(key)
    if attempt < 3:
        raise self.retry(countdown=0.2, exc=RuntimeError(f"attempt {attempt}"))
    return attempt
