# Fills a 64 MiB arena with one write family after another (SET, APPEND, RPUSH, HSET),
# FLUSHALL after each, and prints how many writes each fill took and the arena INFO
# fields: with free blocks reused across size classes (ARCHITECTURE.md, "A full arena is
# an answer, not a crash") every fill after a flush reuses the freed memory. Run from
# the repository root after `cargo build`: python3 bench/arena_after_flush_probe.py [port]
import socket, subprocess, time, sys, os, tempfile
port=int(sys.argv[1]) if len(sys.argv)>1 else 23999
d=tempfile.mkdtemp()
p=subprocess.Popen([os.environ.get("CAIRN", "target/debug/cairn-server"),"--port",str(port),"--dir",d,"--bind","127.0.0.1","--arena-reserve-bytes","64mb","--save",""],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
time.sleep(0.5)
s=socket.create_connection(("127.0.0.1",port))
f=s.makefile("rb")
def cmd(*a):
    out=b"*%d\r\n"%len(a)
    for x in a:
        x=x if isinstance(x,bytes) else str(x).encode()
        out+=b"$%d\r\n%s\r\n"%(len(x),x)
    s.sendall(out)
    l=f.readline()
    if l[:1]==b"$":
        n=int(l[1:]);
        if n>=0: data=f.read(n+2); return data[:-2]
        return None
    return l.strip()
def info():
    t=cmd("INFO","memory").decode()
    return {k:v for k,v in (x.split(":",1) for x in t.split("\r\n") if x.startswith("arena_"))}
chunk=b"x"*65536
fams=[("SET",lambda i:cmd("SET",f"s{i}",chunk)),("APPEND",lambda i:cmd("APPEND","appended",chunk)),("RPUSH",lambda i:cmd("RPUSH",f"l{i//100}",chunk[:4000])),("HSET",lambda i:cmd("HSET","h",f"f{i}",chunk[:2000]))]
cmd("SET","keep","me")
for name,w in fams:
    i=0
    while True:
        r=w(i); i+=1
        if isinstance(r,bytes) and r.startswith(b"-OOM"): break
    print(name,"filled after",i, info())
    cmd("FLUSHALL")
    t=time.time()
    while cmd("SET","keep","me")!=b"+OK":
        if time.time()-t>10:
            print(name,"STUCK", info()); break
        time.sleep(0.01)
    print(name,"after flush", info())
p.kill()
p.wait()
import shutil
shutil.rmtree(d, ignore_errors=True)
