"""A server of its own whose GPU worker emulates a GPU on the CPU
(gpuclust.gpu_worker_emulate = 512MB), for test/server/worker_test.py,
test/server/fault_test.py and test/server/gpus_test.py (two such GPUs:
more options, gpuclust.gpu_devices = '0,1').  That setting exists only in
a testing build (make GC_TESTING=1), so the server runs from the private
PostgreSQL tree of test/lib/testing_build.sh: $GPUCLUST_TESTING_PG_CONFIG
when it is set (test/run_tests.sh builds it once and sets it), else built
here.  Where that build failed (GPUCLUST_TESTING_BUILD_FAILED=1:
test/run_tests.sh's suite "testing build" failed; or the build here), the
suite ends at once with one failed check and its counts, without building
again."""
import contextlib
import os
import shlex
import subprocess
import sys

from report import check, summary

LIB = os.path.dirname(os.path.abspath(__file__))
PG_SERVER = os.path.join(LIB, "pg_server.sh")
EMULATE = "-c gpuclust.gpu_worker_emulate=512MB"
LIBPQ = ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE")


def no_testing_build(why):
    """Ends the suite: one failed check, then its counts (exit status 1)."""
    check("the testing build (make GC_TESTING=1) for the emulated GPU", False, why)
    sys.exit(summary())


def testing_pg_config():
    """The pg_config of the testing build's tree (built when needed)."""
    pgc = os.environ.get("GPUCLUST_TESTING_PG_CONFIG")
    if pgc:
        return pgc
    if os.environ.get("GPUCLUST_TESTING_BUILD_FAILED") == "1":
        no_testing_build("it failed earlier in this run: the suite \"testing build\" says why")
    r = subprocess.run([os.path.join(LIB, "testing_build.sh")], stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        no_testing_build("test/lib/testing_build.sh failed: its output above says why")
    pgc = r.stdout.strip()
    os.environ["GPUCLUST_TESTING_PG_CONFIG"] = pgc
    return pgc


@contextlib.contextmanager
def emulated_gpu_server(directory, port, options=""):
    """A fresh server (data under directory, gpuclust preloaded, its worker
    emulating a GPU) with the libpq variables pointing at it for the block;
    removed after, the variables put back.  options: more server options
    after the emulation's ("-c gpuclust.gpu_devices=0,1": two emulated
    GPUs), at every start.  Yields the shell commands that stop it and
    start it again, and its log's path."""
    own = {"PG_CONFIG": testing_pg_config(), "GPUCLUST_PG_DIR": directory,
           "GPUCLUST_PG_PORT": str(port), "GPUCLUST_PG_NOPRELOAD": "0"}
    opts = f"{EMULATE} {options}".strip()
    env = dict(os.environ, **own, GPUCLUST_PG_OPTS=opts)
    subprocess.run([PG_SERVER, "clean"], env=env, capture_output=True)
    out = subprocess.run([PG_SERVER, "start"], env=env, capture_output=True, text=True, check=True).stdout
    saved = {k: os.environ.get(k) for k in LIBPQ}
    for kv in out.split()[1:]:
        k, v = kv.split("=", 1)
        os.environ[k] = v
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in own.items())
    try:
        yield (f"{prefix} {shlex.quote(PG_SERVER)} stop",
               f"{prefix} GPUCLUST_PG_OPTS={shlex.quote(opts)} {shlex.quote(PG_SERVER)} start",
               os.path.join(directory, "server.log"))
    finally:
        subprocess.run([PG_SERVER, "clean"], env=env, capture_output=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
