#!/usr/bin/env python3
"""Scripting throughput: EVALSHA on cairn-server against Debian's redis-server 7, same run.

Two scripts, loaded with SCRIPT LOAD, each run by `redis-benchmark` as a custom command
(`EVALSHA <sha> 1 key:__rand_int__ v`, -r 100000, -c 50) at -P 1 and -P 16:
  small: INCR + EXPIRE on one key (a rate limiter);
  ten:   ten redis.call()s on the key and four keys named after it (SET, GET, INCR, HSET,
         HGET, LPUSH, LTRIM, SADD, EXPIRE, EXISTS).
A fresh server per measurement; servers interleaved (cairn, redis; then redis, cairn),
ROUNDS rounds; prints the median requests/s per server, the cairn/redis ratio, and the
median server CPU time per request (user + system, from /proc/PID/stat: less sensitive
than requests/s to what else the shared machine runs).

Usage: python3 bench/evalsha.py [--rounds 5] [--requests 300000] [--cairn target/release/cairn-server]
"""
import argparse
import re
import statistics
import subprocess
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from core import cpu_s, start, stop  # noqa: E402

SCRIPTS = {
    "small": "redis.call('INCR', KEYS[1]) return redis.call('EXPIRE', KEYS[1], 100)",
    "ten": "\n".join([
        "local k = KEYS[1]",
        "redis.call('SET', k, ARGV[1])",
        "redis.call('GET', k)",
        "redis.call('INCR', k .. ':n')",
        "redis.call('HSET', k .. ':h', 'f', ARGV[1])",
        "redis.call('HGET', k .. ':h', 'f')",
        "redis.call('LPUSH', k .. ':l', ARGV[1])",
        "redis.call('LTRIM', k .. ':l', 0, 9)",
        "redis.call('SADD', k .. ':s', ARGV[1])",
        "redis.call('EXPIRE', k, 100)",
        "return redis.call('EXISTS', k)",
    ]),
}


def load(port, body):
    out = subprocess.run(["redis-cli", "-p", str(port), "SCRIPT", "LOAD", body],
                         capture_output=True, text=True, check=True).stdout.strip()
    if not re.fullmatch(r"[0-9a-f]{40}", out):
        raise SystemExit(f"SCRIPT LOAD answered {out!r}")
    return out


def bench(port, sha, pipeline, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-r", "100000", "-c", "50",
         "-P", str(pipeline), "-q", "EVALSHA", sha, "1", "key:__rand_int__", "v"],
        capture_output=True, text=True, timeout=600,
    ).stdout.replace("\r", "\n")
    m = re.findall(r"([0-9.]+) requests per second", out)
    return float(m[-1]) if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=300000)
    ap.add_argument("--cairn", default="target/release/cairn-server")
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--only", choices=sorted(SCRIPTS), help="one script only")
    a = ap.parse_args()
    names = [a.only] if a.only else list(SCRIPTS)
    tests = [(n, p) for n in names for p in (1, 16)]
    results = {(srv, t): [] for srv in ("cairn", "redis") for t in tests}
    cpu_us = {(srv, t): [] for srv in ("cairn", "redis") for t in tests}
    for rnd in range(a.rounds):
        for t in tests:
            for srv in ("cairn", "redis") if rnd % 2 == 0 else ("redis", "cairn"):
                proc, port = start(srv, a.cairn if srv == "cairn" else a.redis)
                try:
                    sha = load(port, SCRIPTS[t[0]])
                    before = cpu_s(proc.pid)
                    r = bench(port, sha, t[1], a.requests)
                    used = cpu_s(proc.pid) - before
                finally:
                    stop(proc)
                results[(srv, t)].append(r)
                cpu_us[(srv, t)].append(used * 1e6 / a.requests)
                print(f"round {rnd + 1} {t[0]} P{t[1]} {srv}: {r:.0f} req/s, "
                      f"{used * 1e6 / a.requests:.1f} us CPU/request", file=sys.stderr)

    print("| script | -P | cairn req/s (median) | redis 7 req/s (median) | cairn / redis "
          "| server CPU µs/request (cairn; redis) | rounds (cairn; redis) |")
    print("|---|---:|---:|---:|---:|---|---|")
    for t in tests:
        c = results[("cairn", t)]
        r = results[("redis", t)]
        mc, mr = statistics.median(c), statistics.median(r)
        k = lambda xs: ", ".join(f"{x / 1000:.0f}k" for x in xs)  # noqa: E731
        uc = statistics.median(cpu_us[("cairn", t)])
        ur = statistics.median(cpu_us[("redis", t)])
        print(f"| {t[0]} | {t[1]} | {mc:,.0f} | {mr:,.0f} | {mc / mr:.2f}x | {uc:.1f}; {ur:.1f} "
              f"| {k(c)}; {k(r)} |")


if __name__ == "__main__":
    main()
