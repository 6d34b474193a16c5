#!/usr/bin/env python3
"""trace_summary.py — where a traced call's time goes (cupti_trace.c's file).

    trace_summary.py TRACE [--call K] [--gaps US] [--list]

Splits the trace into calls (every GPU entry creates its streams first and
destroys them last: a call starts at a stream created while none is open)
and prints, for call K (default: the last):
its span, the time the device was busy (kernels, copies, memsets: the union
of their intervals), the kernels by total time, the runtime calls by total
time, and every gap of at least US microseconds (default 20) in which the
device sat idle, with the host calls that ran across it.  --list: every
device operation of the call in order.
"""
import argparse
import re
import signal
import sys
from collections import defaultdict


def short(name):
    """A kernel's name without its template arguments and parameters."""
    name = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).replace("void ", "")


def load(path):
    dev, api = [], []
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split(" ", 4)
            if len(p) < 4:
                continue
            t, s, e = p[0], int(p[1]), int(p[2])
            if t == "K":
                dev.append((s, e, short(p[4])))
            elif t == "C":
                dev.append((s, e, "copy %s B kind %s" % tuple(p[4].split())))
            elif t == "M":
                dev.append((s, e, "memset %s B" % p[4]))
            elif t == "R":
                api.append((s, e, re.sub(r"_v\d+$", "", p[4])))
    dev.sort()
    api.sort()
    return dev, api


def busy(iv):
    total, cur_s, cur_e = 0, None, None
    for s, e, _ in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def by_name(what, recs, most):
    """The most records' names by their total time, with their counts."""
    per = defaultdict(lambda: [0, 0])
    for s, e, n in recs:
        per[n][0] += 1
        per[n][1] += e - s
    print("\n%s by total time:" % what)
    for n, (c, t) in sorted(per.items(), key=lambda x: -x[1][1])[:most]:
        print("  %8.3f ms %5d  %s" % (t / 1e6, c, n))


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under | head
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--call", type=int, default=-1)
    ap.add_argument("--gaps", type=float, default=20.0)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    dev, api = load(a.trace)
    # a call: from a stream created with none open to the last destroyed
    starts, ends, open_ = [], [], 0
    for s, e, n in api:
        if n == "cudaStreamCreateWithFlags":
            if open_ == 0:
                starts.append(s)
            open_ += 1
        elif n == "cudaStreamDestroy" and open_ > 0:
            open_ -= 1
            if open_ == 0:
                ends.append(e)
    if not starts:
        sys.exit("no cudaStreamCreateWithFlags in the trace")
    bounds = starts + [max(max(e for _, e, _ in dev), max(e for _, e, _ in api)) + 1]
    k = a.call if a.call >= 0 else len(starts) + a.call
    lo, hi = bounds[k], bounds[k + 1]
    d = [x for x in dev if lo <= x[0] < hi]
    r = [x for x in api if lo <= x[0] < hi]
    end = max([e for _, e, _ in r] + [e for _, e, _ in d])
    span = (end - lo) / 1e6
    b = busy(d) / 1e6
    print("call %d of %d: span %.2f ms, device busy %.2f ms (%.0f%%), %d device operations, "
          "%d runtime calls" % (k, len(starts), span, b, 100 * b / span, len(d), len(r)))
    by_name("device operations", d, 40)
    by_name("runtime calls", r, 20)
    print("\ndevice idle gaps of %g us or more (offset from the call's start):" % a.gaps)
    prev_end, prev_name, idle = lo, "(start)", 0
    for s, e, n in d:
        gap = s - prev_end
        if gap >= a.gaps * 1e3:
            idle += gap
            calls = defaultdict(lambda: [0, 0])
            for rs, re_, rn in r:
                if re_ > prev_end and rs < s:
                    calls[rn][0] += 1
                    calls[rn][1] += min(re_, s) - max(rs, prev_end)
            what = ", ".join("%s x%d %.0fus" % (cn, c, t / 1e3)
                             for cn, (c, t) in sorted(calls.items(), key=lambda x: -x[1][1])[:4])
            print("  @%8.3f ms  %7.1f us  after %s, before %s: %s"
                  % ((prev_end - lo) / 1e6, gap / 1e3, prev_name, n, what))
        if e > prev_end:
            prev_end, prev_name = e, n
    print("  %.2f ms idle in such gaps" % (idle / 1e6))
    if a.list:
        print("\ndevice operations:")
        for s, e, n in d:
            print("  @%8.3f %8.1f us  %s" % ((s - lo) / 1e6, (e - s) / 1e3, n))


if __name__ == "__main__":
    main()
