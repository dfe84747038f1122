#!/usr/bin/env python3
"""Seed 001's AOF benchmark as the seed ran it (issue #23 point 1), swept over connections.

For each of cairn `always`, cairn `no`, Redis 7 `always`, Redis 7 `no` (Debian's
redis-server from PATH) and each connection count: a fresh server with a fresh log directory,
`cairn-bench aof-seed` (keys preloaded, SET:GET 1:3, 1000 B incompressible values, every
connection driven on its own, GETs verified), then the server is stopped and the directory
removed. Rounds are interleaved, the order reversed every other round. Prints one line per
run, then Markdown: the median per configuration and connection count, each server's peak
with GET/SET p50/p99 there, the ratios of issue #23 point 2, and the model
clients / (round trip + flush wait) next to what was measured.

  python3 bench/aof_seed.py                       # 3 rounds, 16 50 200 800 2000 connections
  python3 bench/aof_seed.py --pin                 # client on CPU 0, servers on CPU 1
  python3 bench/aof_seed.py --tmpfs               # logs on /dev/shm (the engine without the disk)
  python3 bench/aof_seed.py --rounds 1 --warmup 0.2 --duration 1 --connections 16 50 --keys 5000   # a smoke run

Run from the repository root after `cargo build --release -p cairn-server -p cairn-bench`.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [("cairn", "always"), ("cairn", "no"), ("redis", "always"), ("redis", "no")]
# Connections each server is allowed (both servers cap it by their open-files limit).
MAXCLIENTS = 10000
# Share of requests whose reply waits for a flush under `always`: cairn holds only the
# replies of writes (a GET of a clean key is answered at once), Redis writes every reply of
# an event-loop turn after that turn's fsync.
def wait_share(server, set_share):
    return set_share if server == "cairn" else 1.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port, timeout_s):
    """True once the server answers PING (polls until `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def info(port):
    """INFO as a dict (empty if the server does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"INFO\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, _, rest = data.partition(b"\r\n")
                if head.startswith(b"$") and len(rest) >= int(head[1:]) + 2:
                    break
        text = data.decode("utf-8", "replace")
        return dict(l.split(":", 1) for l in text.splitlines() if ":" in l and not l.startswith("#"))
    except (OSError, ValueError):
        return {}


def disk_fsync_us(directory, n=200):
    """Median time (µs) of a 4 KiB append + fdatasync in `directory`: the flush a log on this
    disk pays, measured the same way for both servers (Redis reports no fsync time)."""
    fd, path = tempfile.mkstemp(dir=directory, prefix="fsync-probe.")
    try:
        block = os.urandom(4096)
        times = []
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            times.append((time.perf_counter() - t) * 1e6)
        return statistics.median(times)
    finally:
        os.close(fd)
        os.unlink(path)


def server_cmd(args, server, fsync, port, d):
    common = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", d,
              "--maxclients", str(MAXCLIENTS)]
    aof = ["--appendonly", "no"] if fsync == "no" else ["--appendonly", "yes", "--appendfsync", fsync]
    binary = args.cairn if server == "cairn" else args.redis
    pin = ["taskset", "-c", "1"] if args.pin else []
    return pin + [binary] + common + aof


def one_run(args, server, fsync, conns, base_dir):
    """Starts a fresh server in a fresh directory, runs aof-seed, stops it. Returns a dict."""
    d = tempfile.mkdtemp(prefix=f"aof-seed-{server}-{fsync}.", dir=base_dir)
    port = free_port()
    res = {"server": server, "fsync": fsync, "connections": conns, "ok": False}
    log = open(os.path.join(d, "server.log"), "w")
    proc = subprocess.Popen(server_cmd(args, server, fsync, port, d), stdout=log, stderr=log,
                            start_new_session=True)
    try:
        if not ping(port, 20):
            res["error"] = "server did not answer PING within 20 s"
            return res
        pin = ["taskset", "-c", "0"] if args.pin else []
        cmd = pin + [args.bench, "aof-seed", "-p", str(port), "-c", str(conns), "-t", str(args.threads),
                     "-k", str(args.keys), "-T", str(args.duration), "--warmup", str(args.warmup),
                     "--quiet", "--max-time", str(args.warmup + args.duration + 30), "-o", os.path.join(d, "out")]
        bound_s = args.warmup + args.duration + 120 + args.keys / 5000
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=bound_s)
        except subprocess.TimeoutExpired:
            res["error"] = f"cairn-bench did not finish within {bound_s:.0f} s"
            return res
        line = next((l for l in p.stdout.splitlines() if l.startswith("aof-seed-json ")), None)
        if line is None:
            res["error"] = f"no result (exit {p.returncode}): {p.stderr.strip()[-300:]}"
            return res
        res.update(json.loads(line[len("aof-seed-json "):]))
        problems = [l for l in p.stderr.splitlines() if l.startswith("problem:")]
        if p.returncode != 0 or res.get("all_errors", 0) > 0:
            res["error"] = "; ".join(problems) or f"exit {p.returncode}"
            return res
        res["ok"] = True
        return res
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def ms(us):
    return "n/a" if us is None else f"{us / 1000:.3f}"


def med(runs, key):
    v = [r[key] for r in runs if r.get("ok") and key in r]
    return statistics.median(v) if v else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, nargs="+", default=[16, 50, 200, 800, 2000])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of load per run")
    ap.add_argument("--warmup", type=float, default=1.0,
                    help="seconds of load before the recorded duration (not recorded)")
    ap.add_argument("--keys", type=int, default=100_000, help="keys preloaded per run")
    ap.add_argument("--threads", type=int, default=2, help="cairn-bench worker threads")
    ap.add_argument("--pin", action="store_true", help="client taskset -c 0, server taskset -c 1")
    ap.add_argument("--tmpfs", action="store_true", help="log directories on /dev/shm instead of /var/tmp")
    ap.add_argument("--cairn", default=os.path.join(ROOT, "target/release/cairn-server"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "target/release/cairn-bench"))
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--json", help="write every run's numbers here")
    args = ap.parse_args()
    for b in (args.cairn, args.bench):
        if not os.access(b, os.X_OK):
            sys.exit(f"{b} is missing: cargo build --release -p cairn-server -p cairn-bench")
    if args.duration <= 0 or args.warmup < 0 or args.rounds < 1 or not args.connections or min(args.connections) < 1:
        sys.exit("duration, rounds and connections must be positive")
    base_dir = "/dev/shm" if args.tmpfs else os.environ.get("AOF_DIR", "/var/tmp")
    # Every connection is a descriptor in the client and in the server (children inherit).
    need = max(args.connections) + 128
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        sys.exit(f"open-files hard limit {hard} < {need}: raise it (ulimit -Hn) first")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"# aof_seed: logs in {base_dir}{' (tmpfs)' if args.tmpfs else ''}, pin={args.pin}, "
          f"{args.warmup:g} s warm-up + {args.duration:g} s per run, {args.keys} keys, connections {args.connections}, "
          f"{args.rounds} rounds", flush=True)

    runs = []
    fsync_probe = []
    for rnd in range(1, args.rounds + 1):
        fsync_probe.append(disk_fsync_us(base_dir))
        order = [(s, f, c) for s, f in CONFIGS for c in args.connections]
        if rnd % 2 == 0:
            order.reverse()
        for server, fsync, conns in order:
            r = one_run(args, server, fsync, conns, base_dir)
            r["round"] = rnd
            runs.append(r)
            head = f"round {rnd} {server:5} {fsync:6} c={conns:<5}"
            if r["ok"]:
                extra = ""
                if "server_aof_fsyncs" in r:
                    extra = (f" fsyncs {r['server_aof_fsyncs']:.0f}"
                             f" fsync_p50 {r.get('server_aof_fsync_us_p50', 0):.0f}us")
                print(f"{head} {r['all_qps']:9.0f} ops/s  GET {r['get_qps']:8.0f}/s p50 {ms(r['get_p50_us'])}"
                      f" p99 {ms(r['get_p99_us'])} ms  SET {r['set_qps']:7.0f}/s p50 {ms(r['set_p50_us'])}"
                      f" p99 {ms(r['set_p99_us'])} ms{extra}", flush=True)
            else:
                print(f"{head} FAILED: {r.get('error')}", flush=True)
    disk_us = statistics.median(fsync_probe)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "disk_fsync_us": fsync_probe, "runs": runs}, f, indent=1)

    def cell(server, fsync, conns):
        return [r for r in runs if (r["server"], r["fsync"], r["connections"]) == (server, fsync, conns)]

    print(f"\nMedian over {args.rounds} round(s); latencies in ms; "
          f"disk 4 KiB append+fdatasync p50 {disk_us:.0f} µs ({base_dir})\n")
    print("| server | appendfsync | connections | ops/s | GET p50 | GET p99 | SET p50 | SET p99 | runs ok |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for server, fsync in CONFIGS:
        for c in args.connections:
            rs = cell(server, fsync, c)
            q = med(rs, "all_qps")
            print(f"| {server} | {fsync} | {c} | {'n/a' if q is None else f'{q:.0f}'} | "
                  f"{ms(med(rs, 'get_p50_us'))} | {ms(med(rs, 'get_p99_us'))} | "
                  f"{ms(med(rs, 'set_p50_us'))} | {ms(med(rs, 'set_p99_us'))} | "
                  f"{sum(r['ok'] for r in rs)}/{len(rs)} |")

    peaks = {}
    for server, fsync in CONFIGS:
        best = None
        for c in args.connections:
            q = med(cell(server, fsync, c), "all_qps")
            if q is not None and (best is None or q > best[1]):
                best = (c, q)
        peaks[(server, fsync)] = best
    print("\nPeak per server (the connection count with the highest median ops/s):\n")
    print("| server | appendfsync | best connections | ops/s | GET p50 | GET p99 | SET p50 | SET p99 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (server, fsync), best in peaks.items():
        if best is None:
            print(f"| {server} | {fsync} | n/a | n/a | | | | |")
            continue
        rs = cell(server, fsync, best[0])
        print(f"| {server} | {fsync} | {best[0]} | {best[1]:.0f} | {ms(med(rs, 'get_p50_us'))} | "
              f"{ms(med(rs, 'get_p99_us'))} | {ms(med(rs, 'set_p50_us'))} | {ms(med(rs, 'set_p99_us'))} |")

    def ratio(a, b):
        return "n/a" if a is None or b is None or b == 0 else f"{a / b:.3f}"

    pk = {k: (v[1] if v else None) for k, v in peaks.items()}
    print("\nIssue #23 point 2 at each server's peak:\n")
    print(f"- cairn always / cairn no: {ratio(pk[('cairn', 'always')], pk[('cairn', 'no')])} (target >= 0.85)")
    print(f"- cairn always / Redis always: {ratio(pk[('cairn', 'always')], pk[('redis', 'always')])} (target >= 1.55)")
    for server in ("cairn", "redis"):
        best = peaks[(server, "always")]
        if best is None:
            continue
        c = best[0]
        a, n = med(cell(server, "always", c), "get_p99_us"), med(cell(server, "no", c), "get_p99_us")
        print(f"- {server} GET p99 always / no at {c} connections: {ratio(a, n)}"
              f"{' (target <= 1.5)' if server == 'cairn' else ''}")

    # Model: each connection's cycle is the round trip it has without a log (the mean latency
    # of the `no` run at the same count) plus, for the share of requests whose reply waits for
    # a flush, the flush time: cairn's own fsync p50 from INFO, for Redis the disk probe.
    print("\nModel under `always`: ops/s = clients / (round trip + share waiting × flush wait); "
          "round trip = mean latency under `no` at the same count\n")
    print("| server | connections | round trip (ms) | flush wait (ms) | source | share waiting | model ops/s | measured ops/s | measured / model | SET extra wait (ms) |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    bound = {}
    for server in ("cairn", "redis"):
        for c in args.connections:
            no, al = cell(server, "no", c), cell(server, "always", c)
            rtt_us = med(no, "all_mean_us")
            measured = med(al, "all_qps")
            sets, total = med(al, "set_count"), med(al, "all_count")
            set_share = sets / total if sets and total else 0.25
            fs = med(al, "server_aof_fsync_us_p50") if server == "cairn" else None
            flush_us, source = (fs, "INFO aof_fsync_us_p50") if fs else (disk_us, "disk probe")
            share = wait_share(server, set_share)
            # What a SET's reply really waited beyond its round trip without a log: compare
            # with the flush wait to see what the model leaves out (wake-ups, queueing).
            set_a, set_n = med(al, "set_mean_us"), med(no, "set_mean_us")
            extra = ms(set_a - set_n) if set_a is not None and set_n is not None else "n/a"
            if rtt_us is None:
                print(f"| {server} | {c} | n/a | {ms(flush_us)} | {source} | {share:.2f} | n/a | "
                      f"{'n/a' if measured is None else f'{measured:.0f}'} | n/a | {extra} |")
                continue
            model = c / ((rtt_us + share * flush_us) / 1e6)
            bound[server] = max(bound.get(server, 0), model)
            print(f"| {server} | {c} | {ms(rtt_us)} | {ms(flush_us)} | {source} | {share:.2f} | {model:.0f} | "
                  f"{'n/a' if measured is None else f'{measured:.0f}'} | {ratio(measured, model)} | {extra} |")
    for server, b in bound.items():
        print(f"\nModel's bound for {server} always on this box (best over the counts): {b:.0f} ops/s; "
              f"measured peak {pk[(server, 'always')] or 0:.0f} ({ratio(pk[(server, 'always')], b)} of it)")
    failed = [r for r in runs if not r["ok"]]
    if failed:
        print(f"\n{len(failed)} run(s) failed; see the lines above.")
        sys.exit(3)


if __name__ == "__main__":
    main()
