#!/usr/bin/env python3
"""Core throughput and memory: cairn-server against Debian's redis-server 7, same run.

Runs `redis-benchmark -t set,get -n N -r 1000000 -d 100 -c 50 -P {1,16}` against both
servers, interleaved (cairn, redis, cairn, redis, ...), ROUNDS rounds, and prints the median
requests/s per server and the cairn/redis ratio. Then loads 1M keys x 100 B values into a
fresh instance of each and compares RSS.

Usage: python3 bench/core.py [--rounds 3] [--requests 1000000] [--cairn target/release/cairn-server]
"""
import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start(kind, binary, extra=()):
    port = free_port()
    if kind == "redis":
        cmd = [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
    else:
        cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    proc = subprocess.Popen(list(cmd) + list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{kind} did not start")


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_s(pid):
    """The process's user + system CPU time so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(port, pipeline, requests, extra=()):
    """SET and GET requests/s from redis-benchmark; `extra`: more client arguments (auth)."""
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), *extra, "-t", "set,get", "-n", str(requests),
         "-r", "1000000", "-d", "100", "-c", "50", "-P", str(pipeline), "-q"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    ).stdout.replace("\r", "\n")
    res = {}
    for name in ("SET", "GET"):
        m = re.findall(rf"^{name}: ([0-9.]+) requests per second", out, re.M)
        res[name] = float(m[-1]) if m else 0.0
    return res


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fill(port, keys, size):
    """Loads keys with redis-cli --pipe (RESP), key:%012d -> size bytes."""
    value = b"x" * size
    chunks = []
    for i in range(keys):
        k = b"key:%012d" % i
        chunks.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(value), value))
    data = b"".join(chunks)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=data, capture_output=True, check=True, timeout=600)


def info_field(port, field):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"], capture_output=True, text=True).stdout
    m = re.search(rf"^{field}:(\S+)", out, re.M)
    return m.group(1) if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=1000000)
    ap.add_argument("--cairn", default="target/release/cairn-server")
    ap.add_argument("--redis", default="/usr/bin/redis-server")
    ap.add_argument("--skip-memory", action="store_true")
    a = ap.parse_args()

    results = {(srv, p, cmd): [] for srv in ("cairn", "redis") for p in (1, 16) for cmd in ("SET", "GET")}
    for rnd in range(a.rounds):
        for p in (1, 16):
            for srv in ("cairn", "redis") if rnd % 2 == 0 else ("redis", "cairn"):
                proc, port = start(srv, a.cairn if srv == "cairn" else a.redis)
                try:
                    r = bench(port, p, a.requests)
                finally:
                    stop(proc)
                for cmd in ("SET", "GET"):
                    results[(srv, p, cmd)].append(r[cmd])
                print(f"round {rnd + 1} P{p} {srv}: SET {r['SET']:.0f} GET {r['GET']:.0f}", file=sys.stderr)

    print("| test | cairn req/s (median) | redis 7 req/s (median) | cairn / redis | rounds (cairn; redis) |")
    print("|---|---:|---:|---:|---|")
    for p in (1, 16):
        for cmd in ("SET", "GET"):
            c = results[("cairn", p, cmd)]
            r = results[("redis", p, cmd)]
            mc, mr = statistics.median(c), statistics.median(r)
            print(f"| {cmd} -P {p} | {mc:,.0f} | {mr:,.0f} | {mc / mr:.2f}x | "
                  f"{', '.join(f'{x/1000:.0f}k' for x in c)}; {', '.join(f'{x/1000:.0f}k' for x in r)} |")

    if not a.skip_memory:
        print()
        print("| 1M keys x 100 B | RSS (MiB) | used_memory (MiB) |")
        print("|---|---:|---:|")
        for srv in ("cairn", "redis"):
            proc, port = start(srv, a.cairn if srv == "cairn" else a.redis)
            try:
                fill(port, 1_000_000, 100)
                time.sleep(1)
                rss = rss_kb(proc.pid) / 1024
                used = int(info_field(port, "used_memory")) / (1024 * 1024)
                print(f"| {srv} | {rss:.1f} | {used:.1f} |")
            finally:
                stop(proc)


if __name__ == "__main__":
    main()
