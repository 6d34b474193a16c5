#!/usr/bin/env python3
"""bench_kmeans.py's data = bench_kmeans.c's, bit for bit (no GPU needed).

    /usr/bin/python3 test/gpu/check_bench_data.py [--full]

Compiles bench_kmeans.c's own generator (next, unif, make_blobs,
make_uniform, fingerprint: cut out of the file) with a small main, and
compares X and C0 with bench_kmeans.py's numpy generator: small workloads
element by element, then (--full) the benchmark's four workloads by their
fingerprints, in the benchmark's order (the blob workloads share one
generator state, run on from 12345).  Exit status 0 when all agree.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_kmeans as bk  # noqa: E402

SRC = open(os.path.join(HERE, "bench_kmeans.c")).read()


def cut(name):
    m = re.search(r"\nstatic [^\n]*\n" + name + r"\(.*?\n}\n", SRC, re.S)
    if not m:
        sys.exit(f"check_bench_data: no function {name} in bench_kmeans.c")
    return m.group(0)


MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
%s
#define FAISS_SEED %d	/* bench_kmeans.c's */
int main(int argc, char **argv)
{
	/* argv: mode (raw|fp) then n d k triples; blobs share one state, "u" in
	 * front of a triple makes it uniform from FAISS_SEED */
	int raw = strcmp(argv[1], "raw") == 0;
	uint64_t s = 12345;
	for (int i = 2; i < argc; )
	{
		int uni = strcmp(argv[i], "u") == 0;
		if (uni) i++;
		int64_t n = atoll(argv[i]); int d = atoi(argv[i + 1]), k = atoi(argv[i + 2]);
		i += 3;
		float *C0 = malloc(sizeof(float) * k * d);
		float *X = uni ? make_uniform(n, d, k, FAISS_SEED, C0) : make_blobs(n, d, k, &s, C0);
		if (raw)
		{
			fwrite(X, sizeof(float), (size_t) n * d, stdout);
			fwrite(C0, sizeof(float), (size_t) k * d, stdout);
		}
		else
			printf("%%lld %%d %%d %%#018llx\n", (long long) n, d, k,
				   (unsigned long long) fingerprint(X, n * d, C0, (int64_t) k * d));
		free(X); free(C0);
	}
	return 0;
}
"""


def main():
    full = "--full" in sys.argv
    c_seed = int(re.search(r"#define FAISS_SEED\s+(\w+)", SRC).group(1), 0)
    body = "\n".join(cut(f) for f in ("next", "unif", "make_blobs", "make_uniform", "fingerprint"))
    with tempfile.TemporaryDirectory() as tmp:
        c = os.path.join(tmp, "gen.c")
        exe = os.path.join(tmp, "gen")
        open(c, "w").write(MAIN % (body, c_seed))
        # the flags the Makefile builds bench_kmeans with (TEST_CC: GC_CFLAGS)
        subprocess.run(["cc", "-std=gnu11", "-O3", "-ffp-contract=off", "-fno-math-errno",
                        "-Wall", "-o", exe, c], check=True)
        bad = 0

        small = [(1000, 2, 10), (777, 32, 8), (300, 7, 5), (5000, 1, 3)]
        args = [str(v) for w in small for v in w] + ["u", "600", "16", "12"]
        raw = np.frombuffer(subprocess.run([exe, "raw"] + args, check=True,
                                           capture_output=True).stdout, dtype=np.uint32)
        off, s = 0, bk.BLOB_SEED
        for w in small + [("u", 600, 16, 12)]:
            if w[0] == "u":
                n, d, k = w[1:]
                X, C0 = bk.make_uniform(n, d, k, bk.FAISS_SEED)
            else:
                n, d, k = w
                X, C0, s = bk.make_blobs(n, d, k, s)
            cx, cc = raw[off:off + n * d], raw[off + n * d:off + n * d + k * d]
            off += n * d + k * d
            ok = np.array_equal(cx, X.reshape(-1).view(np.uint32)) and np.array_equal(cc, C0.reshape(-1).view(np.uint32))
            print(f"{'ok  ' if ok else 'FAIL'} {'uniform' if w[0] == 'u' else 'blobs'} n={n} d={d} k={k}: "
                  f"X and C0 {'bit for bit equal' if ok else 'differ'} (X[0] = {X[0][:4]})")
            bad += not ok
        if off != raw.size:
            print(f"FAIL: C wrote {raw.size} words, compared {off}")
            bad += 1

        if full:
            args = [str(v) for w in bk.W for v in w] + ["u"] + [str(v) for v in bk.FAISS]
            cfp = subprocess.run([exe, "fp"] + args, check=True, capture_output=True, text=True).stdout.split("\n")
            s = bk.BLOB_SEED
            for i, w in enumerate(bk.W + [bk.FAISS]):
                n, d, k = w
                if i < len(bk.W):
                    X, C0, s = bk.make_blobs(n, d, k, s)
                else:
                    X, C0 = bk.make_uniform(n, d, k, bk.FAISS_SEED)
                pfp = f"{n} {d} {k} {bk.fingerprint(X, C0):#018x}"
                ok = pfp == cfp[i]
                print(f"{'ok  ' if ok else 'FAIL'} benchmark workload: C {cfp[i]}, numpy {pfp}")
                bad += not ok
                del X, C0
    print(f"check_bench_data: {'all equal' if not bad else f'{bad} differ'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
