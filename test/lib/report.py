"""The report of a Python suite: one line per check ("PASS  name  (detail)"
or "FAIL ..."), INFO lines, and the closing "N passed, M failed" line that
test/run_tests.sh and test/install/pg_matrix.sh count.  Every suite checks through
this one module, so its counts are the suite's."""

passed = failed = 0


def check(name, ok, detail=""):
    """Counts and prints one check; returns ok."""
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"  ({detail})" if detail else ""), flush=True)
    return ok


def info(msg):
    print(f"INFO  {msg}", flush=True)


def summary(label=""):
    """Prints the closing line ("label: N passed, M failed" with a label);
    the exit status: 0 when nothing failed."""
    print(f"{label + ': ' if label else ''}{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1
