#!/usr/bin/env python3
"""Streams, HyperLogLog and GEO: cairn-server against Debian's redis-server 7, same run.

For each test a fresh server of each kind is started, preloaded the same way, and driven by
the same `redis-benchmark` command line (50 connections, -P 1 and -P 16); servers are
interleaved (cairn first in odd rounds, redis first in even ones) and the medians of the
rounds are printed with the cairn/redis ratio, and each server's CPU time per request
(from /proc, steadier than requests/s while the client shares the CPUs). The preloads use distinct members and
values (random-looking, derived from the index), never one repeated value.

Tests:
  XADD              XADD on one of 16 streams, `*` ids, one 16-byte field value
  XRANGE 10         XRANGE from a random id of a 100k-entry stream, COUNT 10
  XREADGROUP        XREADGROUP ... COUNT 1 STREAMS s > (each call delivers one new entry
                    into the group's PEL; the stream is preloaded with 2M entries)
  XACK              XACK of a random id delivered to the group (a 1M-entry PEL, preloaded)
  PFADD             PFADD of a random element to one of 100 HLLs
  PFCOUNT 3 keys    PFCOUNT of three dense HLLs (100k elements each)
  GEOADD            GEOADD of a random member at a fixed point (the member varies)
  GEOSEARCH         GEOSEARCH FROMLONLAT BYRADIUS 50 km ASC COUNT 10 in a 100k-point set

Then memory: RSS growth of 1M stream entries (one stream, one 16-byte field each) and of
100k HLLs (10 elements each, sparse), cairn vs redis.

Usage: python3 bench/newtypes.py [--rounds 3] [--requests 200000] [--only XADD,...]
(PFCOUNT 3 keys and GEOSEARCH run a twentieth of --requests: see REQUEST_DIVISOR.)
"""
import argparse
import hashlib
import math
import statistics
import subprocess
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from core import cpu_s, rss_kb, start, stop  # noqa: E402


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def token(i, salt=b""):
    """A distinct, incompressible-looking 16-character token for index i."""
    return hashlib.blake2b(b"%d" % i + salt, digest_size=8).hexdigest()


def pipe(port, chunks):
    data = b"".join(chunks)
    # No reply timeout of redis-cli's own: under valgrind a preload's replies take minutes.
    subprocess.run(["redis-cli", "-p", str(port), "--pipe", "--pipe-timeout", "0"], input=data,
                   capture_output=True, check=True, timeout=900)


def point(i):
    """A point spread over roughly 10 x 10 degrees around (15, 40), from the index."""
    h = hashlib.blake2b(b"%d" % i, digest_size=8).digest()
    lon = 10.0 + (int.from_bytes(h[:4], "little") / 2**32) * 10.0
    lat = 35.0 + (int.from_bytes(h[4:], "little") / 2**32) * 10.0
    return f"{lon:.6f}", f"{lat:.6f}"


def preload_stream(port, entries, key="s"):
    # Explicit ids i-1 so XRANGE/XACK can name random existing ids with __rand_int__.
    step = 50000
    for base in range(0, entries, step):
        pipe(port, [resp("XADD", key, f"{i + 1}-1", "f", token(i))
                    for i in range(base, min(entries, base + step))])


def setup(test, port):
    if test == "XRANGE 10":
        preload_stream(port, 100_000)
    elif test == "XREADGROUP":
        preload_stream(port, 2_000_000)
        pipe(port, [resp("XGROUP", "CREATE", "s", "g", "0")])
    elif test == "XACK":
        preload_stream(port, 1_000_000)
        pipe(port, [resp("XGROUP", "CREATE", "s", "g", "0")])
        # Deliver everything to the group: the PEL holds 1M ids.
        pipe(port, [resp("XREADGROUP", "GROUP", "g", "c", "COUNT", "10000", "STREAMS", "s", ">")
                    for _ in range(100)])
    elif test == "PFCOUNT 3 keys":
        for k in ("h1", "h2", "h3"):
            pipe(port, [resp("PFADD", k, *[token(i, k.encode()) for i in range(j, j + 1000)])
                        for j in range(0, 100_000, 1000)])
    elif test == "GEOSEARCH":
        chunks = []
        for j in range(0, 100_000, 500):
            args = ["GEOADD", "geo"]
            for i in range(j, j + 500):
                lon, lat = point(i)
                args += [lon, lat, token(i)]
            chunks.append(resp(*args))
        pipe(port, chunks)


# The redis-benchmark command per test: (-r keyspace, command words). redis-benchmark puts
# a fresh random number (12 digits, below -r) in every __rand_int__.
COMMANDS = {
    "XADD": (16, ["XADD", "s:__rand_int__", "*", "f", "0123456789abcdef"]),
    "XRANGE 10": (100_000, ["XRANGE", "s", "__rand_int__", "+", "COUNT", "10"]),
    "XREADGROUP": (1, ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"]),
    "XACK": (1_000_000, ["XACK", "s", "g", "__rand_int__-1"]),
    "PFADD": (100, ["PFADD", "hll:__rand_int__", "__rand_int__"]),
    "PFCOUNT 3 keys": (1, ["PFCOUNT", "h1", "h2", "h3"]),
    "GEOADD": (1_000_000, ["GEOADD", "geo", "13.361389", "38.115556", "m:__rand_int__"]),
    "GEOSEARCH": (1, ["GEOSEARCH", "geo", "FROMLONLAT", "15", "40", "BYRADIUS", "50", "km",
                      "ASC", "COUNT", "10"]),
}


# Tests whose requests cost ~100x an XADD run a twentieth of `--requests`, so that each run
# takes seconds, as the others do, and a 5-round run fits in a quiet quarter of an hour.
REQUEST_DIVISOR = {"PFCOUNT 3 keys": 20, "GEOSEARCH": 20}


def requests_for(test, requests):
    return max(1000, requests // REQUEST_DIVISOR.get(test, 1))


def run_benchmark(port, test, pipeline, requests):
    keyspace, words = COMMANDS[test]
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50", "-P",
         str(pipeline), "-r", str(keyspace), "-q", *words],
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    ).stdout.replace("\r", "\n")
    rates = [float(line.split(": ")[1].split()[0]) for line in out.splitlines()
             if "requests per second" in line]
    return rates[-1] if rates else 0.0


def memory(kind, binary):
    """RSS growth (MiB) for 1M stream entries and for 100k HLLs, each on a fresh server."""
    res = {}
    proc, port = start(kind, binary)
    try:
        time.sleep(0.5)
        before = rss_kb(proc.pid)
        preload_stream(port, 1_000_000)
        time.sleep(1)
        res["1M stream entries"] = (rss_kb(proc.pid) - before) / 1024
    finally:
        stop(proc)
    proc, port = start(kind, binary)
    try:
        time.sleep(0.5)
        before = rss_kb(proc.pid)
        chunks = [resp("PFADD", f"hll:{i}", *[token(i * 10 + j) for j in range(10)])
                  for i in range(100_000)]
        pipe(port, chunks)
        time.sleep(1)
        res["100k HLLs (10 elements)"] = (rss_kb(proc.pid) - before) / 1024
    finally:
        stop(proc)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--cairn", default="target/release/cairn-server")
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--only", default="", help="comma-separated test names")
    ap.add_argument("--skip-memory", action="store_true")
    a = ap.parse_args()
    tests = [t for t in COMMANDS if not a.only or t in a.only.split(",")]
    binaries = {"cairn": a.cairn, "redis": a.redis}
    results = {}
    # Server CPU per request: steadier than requests/s when the client shares the CPUs.
    cpu = {}
    for rnd in range(a.rounds):
        order = ("cairn", "redis") if rnd % 2 == 0 else ("redis", "cairn")
        for test in tests:
            for p in (1, 16):
                for srv in order:
                    proc, port = start(srv, binaries[srv])
                    try:
                        setup(test, port)
                        cpu_before = cpu_s(proc.pid)
                        n = requests_for(test, a.requests)
                        r = run_benchmark(port, test, p, n)
                        cpu_us = (cpu_s(proc.pid) - cpu_before) * 1e6 / n
                    finally:
                        stop(proc)
                    results.setdefault((test, p, srv), []).append(r)
                    cpu.setdefault((test, p, srv), []).append(cpu_us)
                    print(f"round {rnd + 1} {test} P{p} {srv}: {r:.0f} req/s, "
                          f"{cpu_us:.2f} us CPU/request", file=sys.stderr)

    print("| test | -P | cairn req/s (median) | redis 7 req/s (median) | cairn / redis | "
          "server CPU µs/request cairn; redis (median) | rounds (cairn; redis) |")
    print("|---|---:|---:|---:|---:|---|---|")
    for test in tests:
        for p in (1, 16):
            c, r = results[(test, p, "cairn")], results[(test, p, "redis")]
            mc, mr = statistics.median(c), statistics.median(r)
            ratio = mc / mr if mr else math.nan
            cc, cr = statistics.median(cpu[(test, p, "cairn")]), statistics.median(cpu[(test, p, "redis")])
            print(f"| {test} | {p} | {mc:,.0f} | {mr:,.0f} | {ratio:.2f}x | {cc:.2f}; {cr:.2f} | "
                  f"{', '.join(f'{x / 1000:.0f}k' for x in c)}; {', '.join(f'{x / 1000:.0f}k' for x in r)} |")
    if not a.skip_memory:
        mem = {srv: memory(srv, binaries[srv]) for srv in ("cairn", "redis")}
        print()
        print("| RSS growth | cairn (MiB) | redis 7 (MiB) | cairn / redis |")
        print("|---|---:|---:|---:|")
        for name in mem["cairn"]:
            c, r = mem["cairn"][name], mem["redis"][name]
            print(f"| {name} | {c:.1f} | {r:.1f} | {c / r:.2f}x |")


if __name__ == "__main__":
    main()
