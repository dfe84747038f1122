#!/usr/bin/env python3
"""Reads cairn's executor timeline (`latency-trace-file`) against a probe's requests.

Usage:
  trace_probe.py probe PORT SECONDS OUT.tsv   # 1 KB-ish GETs of key:1 every 1 ms on one
                                              # connection, each line: send_us recv_us
  trace_probe.py read TRACE [OUT.tsv]         # turn-length distribution, what the long
                                              # turns did, and for the slowest probe GETs
                                              # the turns that ran between send and reply

Timestamps are wall-clock microseconds on both sides (same machine), so a probe request
lines up with the trace's `start_us`.
"""
import socket
import sys
import time


def probe(port, seconds, out):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n"
    end = time.time() + seconds
    rows = []
    buf = b""
    while time.time() < end:
        t0 = time.time_ns() // 1000
        s.sendall(req)
        while True:
            buf += s.recv(65536)
            # One bulk reply (or a nil): header line, then its payload.
            nl = buf.find(b"\r\n")
            if nl < 0:
                continue
            n = int(buf[1:nl])
            need = nl + 2 + (n + 2 if n >= 0 else 0)
            if len(buf) >= need:
                buf = buf[need:]
                break
        t1 = time.time_ns() // 1000
        rows.append((t0, t1))
        time.sleep(0.001)
    with open(out, "w") as f:
        for a, b in rows:
            f.write(f"{a}\t{b}\n")


def parse(path):
    turns = []
    for line in open(path):
        if not line.startswith("turn "):
            continue
        d = {}
        for w in line.split()[1:]:
            k, _, v = w.partition("=")
            d[k] = v
        for k in list(d):
            if k not in ("w", "r"):
                d[k] = int(d[k])
        turns.append(d)
    turns.sort(key=lambda t: t["start_us"])
    return turns


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else 0


def show_turn(t, base):
    return (f"  +{t['start_us'] - base:>7} µs len {t['len_us']:>5} µs wait {t['wait_us']:>5} "
            f"cmds {t['cmds']:>3} bytes {t['bytes']:>8} ref {t['ref_bytes']:>8} "
            f"writev {t['writev_us']:>5} µs/{t['writevs']} (max {t['writev_max_us']}) "
            f"cut {t['budget_cut']} minflt {t['minflt']} preempt {t.get('nivcsw', '?')} "
            f"queued {t['queued']} "
            f"io_depth {t['io_depth']} w={t['w']}")


def read(trace, probe_out=None):
    turns = parse(trace)
    if not turns:
        print("no turns")
        return
    lens = [t["len_us"] for t in turns]
    span = (turns[-1]["start_us"] - turns[0]["start_us"]) / 1e6
    print(f"{len(turns)} turns over {span:.1f} s; turn length p50 {pct(lens, .5)} "
          f"p99 {pct(lens, .99)} p99.9 {pct(lens, .999)} max {max(lens)} µs")
    # The noise scenario's phases: before the first large reference written (or queued,
    # io-threads) is the baseline.
    first_big = next((t["start_us"] for t in turns if t["ref_bytes"] > 0 or t["ref_queued"] > 0),
                     None)
    for name, ts in (("baseline phase", [t for t in turns if first_big is None or t["start_us"] < first_big]),
                     ("noise phase", [t for t in turns if first_big is not None and t["start_us"] >= first_big])):
        if not ts:
            continue
        ls = [t["len_us"] for t in ts]
        long_ = [t for t in ts if t["len_us"] >= 1000]
        pre = [t for t in long_ if t.get("nivcsw", 0) > 0]
        in_wv = sum(t["writev_us"] for t in long_)
        tot = sum(t["len_us"] for t in long_) or 1
        span_s = (ts[-1]["start_us"] - ts[0]["start_us"]) / 1e6 or 1
        print(f"{name}: {len(ts)} turns in {span_s:.1f} s; length p50 {pct(ls, .5)} p99 {pct(ls, .99)} "
              f"p99.9 {pct(ls, .999)} max {max(ls)} µs; turns >= 1 ms: {len(long_)} "
              f"({len(long_) / span_s:.1f}/s), {len(pre)} of them preempted, "
              f"{100 * in_wv / tot:.0f}% of their time in writev")
    big = [t for t in turns if t["ref_bytes"] > 0]
    small = [t for t in turns if t["ref_bytes"] == 0]
    for name, ts in (("turns writing a large reference", big), ("other turns", small)):
        if not ts:
            continue
        ls = [t["len_us"] for t in ts]
        wv = [t["writev_us"] for t in ts]
        mf = [t["minflt"] for t in ts]
        print(f"{name}: {len(ts)}, length p50 {pct(ls, .5)} p99 {pct(ls, .99)} max {max(ls)} µs; "
              f"writev p50 {pct(wv, .5)} p99 {pct(wv, .99)} max {max(wv)} µs; "
              f"minflt p50 {pct(mf, .5)} max {max(mf)}")
    print("longest turns:")
    for t in sorted(turns, key=lambda t: -t["len_us"])[:10]:
        print(show_turn(t, turns[0]["start_us"]))
    if not probe_out:
        return
    reqs = [tuple(map(int, l.split())) for l in open(probe_out) if l.strip()]
    lat = sorted(((b - a, a, b) for a, b in reqs), reverse=True)
    ls = [x[0] for x in lat]
    print(f"probe: {len(lat)} GETs, p50 {pct(ls, .5)} p99 {pct(ls, .99)} "
          f"p99.9 {pct(ls, .999)} max {max(ls)} µs")
    starts = [t["start_us"] for t in turns]
    import bisect
    for l, a, b in lat[:8]:
        print(f"slow GET: {l} µs (sent +{a - turns[0]['start_us']} µs)")
        i = max(0, bisect.bisect_left(starts, a) - 1)
        while i < len(turns) and turns[i]["start_us"] <= b:
            print(show_turn(turns[i], turns[0]["start_us"]))
            i += 1


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        probe(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
    else:
        read(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
