"""Real Python frameworks, unmodified, against a server started per test (see conftest.py).

Each framework's own behaviour is the oracle: a lock excludes, a task runs once and its
result comes back, a queued job survives a worker restart.
"""

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest
import redis
import redis.exceptions

HERE = pathlib.Path(__file__).resolve().parent
BIN = pathlib.Path(sys.executable).parent


def wait_until(cond, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def first_error(text):
    """The last line of a process's output that names an error (else its tail)."""
    lines = [line.strip() for line in text.splitlines() if "Error" in line]
    return lines[-1] if lines else text[-500:]


def contend(make_lock, rounds=40):
    """Two threads each do `rounds` non-atomic read-modify-write increments under the lock.

    Without mutual exclusion increments are lost; with it the counter ends at 2 * rounds.
    """
    counter = {"value": 0, "inside": 0, "overlap": 0}

    def worker():
        lock = make_lock()
        for _ in range(rounds):
            with lock:
                counter["inside"] += 1
                if counter["inside"] > 1:
                    counter["overlap"] += 1
                v = counter["value"]
                time.sleep(0.001)
                counter["value"] = v + 1
                counter["inside"] -= 1

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive()
    assert counter["overlap"] == 0
    assert counter["value"] == 2 * rounds


# ---------------------------------------------------------------- redis-py Lock

def test_redis_py_lock(server):
    r = server.client()
    contend(lambda: server.client().lock("rp:lock", timeout=10, blocking_timeout=30))

    a = r.lock("rp:one", timeout=5)
    b = server.client().lock("rp:one", timeout=5)
    assert a.acquire(blocking=False)
    assert not b.acquire(blocking=False)
    assert a.owned() and not b.owned()
    assert a.extend(10)
    assert 5000 < r.pttl("rp:one") <= 15000
    assert a.extend(20, replace_ttl=True)
    assert 15000 < r.pttl("rp:one") <= 20000
    assert a.reacquire()
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        b.do_release(b"not-the-token")
    a.release()
    assert not r.exists("rp:one")
    assert b.acquire(blocking=False)
    with pytest.raises(redis.exceptions.LockError):
        a.release()
    # Expiry frees a lock whose holder vanished.
    c = r.lock("rp:ttl", timeout=0.2)
    assert c.acquire(blocking=False)
    d = r.lock("rp:ttl", timeout=5)
    assert d.acquire(blocking=True, blocking_timeout=10)
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        c.extend(1)


# ---------------------------------------------------------------- python-redis-lock

def test_python_redis_lock(server):
    import redis_lock

    contend(lambda: redis_lock.Lock(server.client(), "prl:count", expire=10))

    r = server.client()
    a = redis_lock.Lock(r, "prl:one", expire=5)
    b = redis_lock.Lock(server.client(), "prl:one", expire=30)
    assert a.acquire(blocking=False)
    assert not b.acquire(blocking=False)
    assert b.locked()
    a.extend(30)
    assert 5 < r.ttl("lock:prl:one") <= 30
    with pytest.raises(redis_lock.NotAcquired):
        b.release()
    # A blocked acquirer is woken by the release signal list (BLPOP), not by expiry.
    got = {}

    def waiter():
        got["ok"] = b.acquire(blocking=True, timeout=20)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    a.release()
    t.join(30)
    assert got["ok"] is True
    assert b.get_owner_id() == b.id
    b.release()
    assert not r.exists("lock:prl:one")
    # auto_renewal keeps a short lock alive past its expiry.
    c = redis_lock.Lock(r, "prl:renew", expire=1, auto_renewal=True)
    assert c.acquire()
    time.sleep(1.6)
    assert r.exists("lock:prl:renew")
    c.release()
    redis_lock.reset_all(r)


# ---------------------------------------------------------------- pottery

def test_pottery_redlock(server):
    from pottery import Redlock, ReleaseUnlockedLock

    contend(lambda: Redlock(key="pot:count", masters={server.client()},
                            auto_release_time=10))
    r = server.client()
    a = Redlock(key="pot:one", masters={r}, auto_release_time=5)
    b = Redlock(key="pot:one", masters={server.client()}, auto_release_time=5)
    assert a.acquire(blocking=False)
    assert not b.acquire(blocking=False)
    assert a.locked() > 0
    assert b.locked() == 0
    a.extend()
    a.release()
    with pytest.raises(ReleaseUnlockedLock):
        a.release()
    assert b.acquire(timeout=5)
    b.release()


@pytest.mark.needs("PFADD", "PFCOUNT", "PFMERGE")
def test_pottery_hyperloglog(server):
    from pottery import HyperLogLog

    r = server.client()
    a = HyperLogLog({f"a{i}" for i in range(500)}, redis=r, key="pot:hll:a")
    b = HyperLogLog({f"a{i}" for i in range(250, 750)}, redis=r, key="pot:hll:b")
    assert 490 <= len(a) <= 510
    assert "a3" in a and "zz" not in a
    a.update(b)
    assert 730 <= len(a) <= 770
    assert 490 <= len(b) <= 510
    assert r.type("pot:hll:a") == b"string"


def test_pottery_containers(server):
    from pottery import (BloomFilter, NextID, RedisCounter, RedisDeque, RedisDict, RedisList,
                         RedisSet, redis_cache)

    r = server.client()
    d = RedisDict({"a": 1, "b": [1, 2]}, redis=r, key="pot:d")
    d["c"] = {"x": None}
    del d["a"]
    assert dict(d) == {"b": [1, 2], "c": {"x": None}} and len(d) == 2 and "a" not in d
    lst = RedisList([1, 2, 3], redis=r, key="pot:l")
    lst.insert(1, 9)
    lst.append(4)
    assert list(lst) == [1, 9, 2, 3, 4] and lst[1] == 9 and lst[-1] == 4
    assert lst.pop() == 4 and lst.index(9) == 1
    del lst[0]
    assert list(lst) == [9, 2, 3]
    st = RedisSet({1, 2, 3}, redis=r, key="pot:s")
    st.add(4)
    st.discard(1)
    assert sorted(st) == [2, 3, 4] and 2 in st and 1 not in st
    assert st.isdisjoint({7}) and st.issubset({2, 3, 4, 5})
    c = RedisCounter("abracadabra", redis=r, key="pot:c")
    c["z"] += 3
    assert c.most_common(2) == [("a", 5), ("z", 3)] and sum(c.values()) == 14
    q = RedisDeque([1, 2], redis=r, key="pot:q", maxlen=3)
    q.appendleft(0)
    q.append(9)
    assert list(q) == [1, 2, 9]
    q.rotate(1)
    assert list(q) == [9, 1, 2]
    ids = NextID(key="pot:ids", masters={r})
    assert [next(ids), next(ids), next(ids)] == [1, 2, 3]
    calls = []

    @redis_cache(redis=r, key="pot:cache")
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16] and calls == [3, 4]
    bf = BloomFilter({"x", "y"}, num_elements=100, false_positives=0.01, redis=r, key="pot:bf")
    assert "x" in bf and "y" in bf and "zz" not in bf and len(bf) == 2


@pytest.mark.needs("SORT")
def test_pottery_list_sort(server):
    from pottery import RedisList

    lst = RedisList([3, 1, 2], redis=server.client(), key="pot:sorted")
    lst.sort()
    assert list(lst) == [1, 2, 3]
    lst.sort(reverse=True)
    assert list(lst) == [3, 2, 1]


@pytest.mark.needs("XADD")
def test_pottery_simple_queue(server):
    from pottery import RedisSimpleQueue

    q = RedisSimpleQueue(redis=server.client(), key="pot:sq")
    q.put(1)
    q.put({"two": 2})
    assert q.qsize() == 2
    assert q.get() == 1 and q.get() == {"two": 2} and q.empty()


# ---------------------------------------------------------------- Celery

class CeleryWorker:
    def __init__(self, server, name):
        self.env = dict(os.environ, CELERY_REDIS_URL=server.url,
                        PYTHONPATH=str(HERE))
        self.log_path = os.path.join(server.dir, f"celery-{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(BIN / "celery"), "-A", "celery_app", "worker", "--pool=solo",
             "--loglevel=INFO", "-n", f"{name}@%h"],
            cwd=HERE, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

    def text(self):
        return pathlib.Path(self.log_path).read_text()

    def wait_ready(self):
        wait_until(lambda: "ready." in self.text() or self.proc.poll() is not None,
                   60, "celery worker ready")
        assert self.proc.poll() is None, first_error(self.text())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # warm shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def celery(server, monkeypatch):
    monkeypatch.setenv("CELERY_REDIS_URL", server.url)
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("celery_app", None)
    import celery_app

    yield celery_app
    celery_app.app.close()
    sys.modules.pop("celery_app", None)


def test_celery(server, celery):
    from celery import chord, group

    w = CeleryWorker(server, "w1")
    try:
        w.wait_ready()
        # Round trip through the broker and the result backend.
        assert celery.add.delay(2, 3).get(timeout=30) == 5
        # A group and a chord (the Redis backend counts chord parts itself).
        assert group(celery.add.s(i, i) for i in range(6))().get(timeout=30) == [
            0, 2, 4, 6, 8, 10]
        assert chord(celery.add.s(i, 1) for i in range(5))(celery.tsum.s()).get(
            timeout=30) == 15
        # A task that asks for two retries runs three times and then succeeds.
        res = celery.flaky.delay("celery:attempts")
        assert res.get(timeout=30) == 3
        assert server.client().get("celery:attempts") == b"3"
        assert res.state == "SUCCESS"
        # A countdown (ETA) task, and the broadcast control channel (pub/sub fanout).
        assert celery.add.apply_async((1, 1), countdown=1).get(timeout=30) == 2
        replies = celery.app.control.ping(timeout=5)
        assert [list(r.values())[0] for r in replies] == [{"ok": "pong"}], replies
        registered = celery.app.control.inspect(timeout=5).registered()
        assert registered and "celery_app.add" in list(registered.values())[0], registered
    finally:
        w.stop()
    assert w.proc.returncode == 0, first_error(w.text())

    # Queued while no worker runs: the next worker picks it up.
    queued = celery.add.delay(20, 22)
    time.sleep(0.3)
    assert queued.state == "PENDING"
    w2 = CeleryWorker(server, "w2")
    try:
        w2.wait_ready()
        assert queued.get(timeout=30) == 42
    finally:
        w2.stop()
    assert w2.proc.returncode == 0, first_error(w2.text())


# ---------------------------------------------------------------- RQ

@pytest.mark.needs("XADD")
def test_rq(server):
    import rq_jobs
    from rq import Queue, Retry

    r = server.client()
    q = Queue("fw", connection=r)
    ok = q.enqueue(rq_jobs.multiply, 6, 7)
    bad = q.enqueue(rq_jobs.fail_always, retry=Retry(max=1))
    assert ok.get_status() == "queued"
    assert len(q) == 2
    env = dict(os.environ, PYTHONPATH=str(HERE))
    out = subprocess.run(
        [str(BIN / "rq"), "worker", "--burst", "--url", server.url, "fw"],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, first_error(out.stdout + out.stderr)
    ok.refresh()
    assert ok.get_status() == "finished", first_error(out.stdout + out.stderr)
    assert ok.return_value() == 42
    bad.refresh()
    assert bad.get_status() == "failed"
    assert "boom" in bad.latest_result().exc_string
    assert len(q.failed_job_registry) == 1
    assert len(q) == 0
