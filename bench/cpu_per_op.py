#!/usr/bin/env python3
"""CPU per command of a running server, per thread, over 2 s (issue #7's analysis).

Usage: python3 bench/cpu_per_op.py SERVER_PID PORT [CLIENT_PID]
Reads /proc/PID/task/*/stat (utime+stime) and /proc/stat before and after, and INFO
total_commands_processed; prints commands/s, the machine's busy and iowait share, the
machine's CPU time per command and each thread's (the client's too when given).
"""
import os, sys, time, subprocess, glob
pid=int(sys.argv[1]); port=sys.argv[2]; bpid=int(sys.argv[3]) if len(sys.argv)>3 else None
def cmds():
    out=subprocess.run(['redis-cli','-p',port,'info','stats'],capture_output=True,text=True).stdout
    for l in out.splitlines():
        if l.startswith('total_commands_processed:'): return int(l.split(':')[1])
def threads(p):
    r={}
    for t in glob.glob(f'/proc/{p}/task/*'):
        try:
            s=open(t+'/stat').read(); name=s[s.index('(')+1:s.rindex(')')]; f=s[s.rindex(')')+2:].split()
            r[t.split('/')[-1]+':'+name]=int(f[11])+int(f[12])
        except Exception: pass
    return r
def machine():
    v=list(map(int,open('/proc/stat').readline().split()[1:])); return sum(v)-v[3]-v[4], v[4]
c0=cmds(); t0=threads(pid); b0=threads(bpid) if bpid else {}; m0=machine(); w0=time.time()
time.sleep(2)
c1=cmds(); t1=threads(pid); b1=threads(bpid) if bpid else {}; m1=machine(); w1=time.time()
n=c1-c0-1; tick=1e6/os.sysconf('SC_CLK_TCK')
ncpu=os.cpu_count(); hz=os.sysconf('SC_CLK_TCK')
print(f"{n/(w1-w0):.0f} cmds/s; machine busy {(m1[0]-m0[0])/hz/(w1-w0)/ncpu:.0%} iowait {(m1[1]-m0[1])/hz/(w1-w0)/ncpu:.0%}; machine cpu/cmd {(m1[0]-m0[0])*tick/n:.1f}us")
for k in t1:
    d=t1[k]-t0.get(k,0)
    if d: print(f"  {k}: {d*tick/n:.2f}us/cmd")
for k in b1:
    d=b1[k]-b0.get(k,0)
    if d: print(f"  bench {k}: {d*tick/n:.2f}us/cmd")
