#!/usr/bin/env python3
"""What an ACL user with key patterns costs: redis-benchmark SET/GET at -P 1 and -P 16 as the
`default` user (no password) and as a user holding key patterns (`on >pw ~key:* ~counter:*
~mylist:* +@all`), on cairn-server and on Debian's redis-server 7, same run.

A fresh server per measurement; the four (server, user) cases interleaved, their order
reversed every other round; ROUNDS rounds. Prints the median requests/s and the median
server CPU time per request (user + system, /proc/PID/stat: steadier than requests/s on a
shared machine) per case, and the ACL user's cost against `default` on each server.

Usage: python3 bench/acl.py [--rounds 5] [--requests 200000] [--cairn target/release/cairn-server]
"""
import argparse
import statistics
import subprocess
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from core import bench, cpu_s, start, stop  # noqa: E402

ACL_RULES = ["on", ">benchpass", "~key:*", "~counter:*", "~mylist:*", "+@all"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--cairn", default="target/release/cairn-server")
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    a = ap.parse_args()
    cases = [(srv, user) for srv in ("cairn", "redis") for user in ("default", "acl")]
    rps = {(c, p, t): [] for c in cases for p in (1, 16) for t in ("SET", "GET")}
    cpu = {(c, p): [] for c in cases for p in (1, 16)}
    for rnd in range(a.rounds):
        order = cases if rnd % 2 == 0 else list(reversed(cases))
        for p in (1, 16):
            for case in order:
                srv, user = case
                proc, port = start(srv, a.cairn if srv == "cairn" else a.redis)
                try:
                    subprocess.run(["redis-cli", "-p", str(port), "ACL", "SETUSER", "bench",
                                    *ACL_RULES], check=True, capture_output=True)
                    before = cpu_s(proc.pid)
                    auth = ["--user", "bench", "-a", "benchpass"] if user == "acl" else []
                    r = bench(port, p, a.requests, auth)
                    used = cpu_s(proc.pid) - before
                finally:
                    stop(proc)
                if min(r.values()) <= 0:
                    raise SystemExit(f"{srv} as {user}: no result (refused?)")
                for t in ("SET", "GET"):
                    rps[(case, p, t)].append(r[t])
                per_req = used * 1e6 / (2 * a.requests)
                cpu[(case, p)].append(per_req)
                print(f"round {rnd + 1} P{p} {srv} {user}: SET {r['SET']:.0f} GET {r['GET']:.0f} "
                      f"req/s, {per_req:.2f} us CPU/request", file=sys.stderr)

    med = statistics.median
    print("| server | -P | SET req/s default; ACL user | GET req/s default; ACL user "
          "| server CPU µs/request default; ACL user | ACL user's CPU cost |")
    print("|---|---:|---|---|---|---:|")
    for srv in ("cairn", "redis"):
        for p in (1, 16):
            d, u = (srv, "default"), (srv, "acl")
            cd, cu = med(cpu[(d, p)]), med(cpu[(u, p)])
            print(f"| {srv} | {p} | {med(rps[(d, p, 'SET')]):,.0f}; {med(rps[(u, p, 'SET')]):,.0f} "
                  f"| {med(rps[(d, p, 'GET')]):,.0f}; {med(rps[(u, p, 'GET')]):,.0f} "
                  f"| {cd:.2f}; {cu:.2f} | {100 * (cu / cd - 1):+.1f} % |")


if __name__ == "__main__":
    main()
