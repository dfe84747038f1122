# Space and write amplification of the tier file before and after compaction
# (ARCHITECTURE.md, "Tiered store"): a tiered cairn (maxmemory 4mb) is loaded with ~3x
# maxmemory of values, a random 80 % of the cold ones are deleted, and the INFO tiered
# fields are printed right after the deletes (compaction already runs during them) and
# once it has settled (no move in flight and the amplification unchanged for 3 s, at
# most 120 s). Two value mixes:
# `small` (200-1500 bytes) and `mixed` (10 % 100-300, 10 % 6000-9000, 80 % 700-1300).
# Counts, not timings. Run from the repository root after `cargo build`:
#   python3 bench/tier_compact_probe.py [port]
import os, random, socket, subprocess, sys, tempfile, time

PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 23997
FIELDS = ["tiered_allocated_bytes", "tiered_live_record_bytes", "tiered_space_amplification",
          "tiered_write_amplification", "tiered_sparse_pages", "tiered_compactions",
          "tiered_compaction_moved_records", "tiered_compaction_moved_bytes",
          "tiered_compaction_uncooled", "tiered_stash_bytes", "tiered_written_bytes",
          "tiered_partial_page_writes",
          "tiered_throttled_writes", "tiered_throttled_ooms", "tiered_entries"]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def send(self, *cmds):
        out = b""
        for a in cmds:
            out += b"*%d\r\n" % len(a)
            for x in a:
                x = x if isinstance(x, bytes) else str(x).encode()
                out += b"$%d\r\n%s\r\n" % (len(x), x)
        self.s.sendall(out)
        return [self.reply() for _ in cmds]

    def reply(self):
        l = self.f.readline()
        if l[:1] == b"$":
            n = int(l[1:])
            return self.f.read(n + 2)[:-2] if n >= 0 else None
        return l.strip()

    def info(self):
        t = self.send(("INFO", "tiered"))[0].decode()
        return dict(x.split(":", 1) for x in t.split("\r\n") if ":" in x)


def value(rng, mix, i):
    if mix == "small":
        n = rng.randint(200, 1500)
    else:
        n = [rng.randint(100, 300), rng.randint(6000, 9000)][i % 10] if i % 10 < 2 else rng.randint(700, 1300)
    return i.to_bytes(8, "little") + rng.randbytes(n - 8)


def run(mix, n):
    d = tempfile.mkdtemp(prefix="tier-compact-probe-")
    srv = subprocess.Popen([os.environ.get("CAIRN", "target/debug/cairn-server"), "--port", str(PORT),
                            "--bind", "127.0.0.1", "--dir", d, "--save", "", "--maxmemory", "4mb",
                            "--enable-debug-command", "yes", "--tiered-prefix", d + "/tier"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        c = Conn(PORT)
        rng = random.Random(7)
        vals = [value(rng, mix, i) for i in range(n)]
        todo = list(range(n))
        while todo:
            again = []
            for b in range(0, len(todo), 100):
                batch = todo[b:b + 100]
                for i, r in zip(batch, c.send(*[("SET", f"k{i}", vals[i]) for i in batch])):
                    if r.startswith(b"-OOM"):
                        again.append(i)
            if again:
                time.sleep(0.2)
            todo = again
        cold = []
        for b in range(0, n, 500):
            keys = [f"k{i}" for i in range(b, min(n, b + 500))]
            for i, r in zip(range(b, b + 500), c.send(*[("DEBUG", "TIERED-STATE", k) for k in keys])):
                if r == b"+cold":
                    cold.append(i)
        gone = [i for i in cold if rng.random() < 0.8]
        for b in range(0, len(gone), 500):
            c.send(*[("DEL", f"k{i}") for i in gone[b:b + 500]])
        before = c.info()
        last, stable, t0 = None, 0, time.time()
        while time.time() - t0 < 120 and stable < 3:
            time.sleep(1)
            i = c.info()
            a = i["tiered_space_amplification"]
            stable = stable + 1 if a == last and i["tiered_compaction_moves_pending"] == "0" else 0
            last = a
        after = c.info()
        print(f"mix {mix}: {n} values, {len(cold)} cold, {len(gone)} deleted, settled after {time.time() - t0:.0f} s")
        for k in FIELDS:
            print(f"  {k:36} {before.get(k, '?'):>12} {after.get(k, '?'):>12}")
    finally:
        srv.kill()
        srv.wait()


run("small", 14000)
run("mixed", 8000)
