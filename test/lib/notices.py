"""The notices a call raises: notices_during() keeps those a session set up
by some SQL raises while a function runs; nested_plans() the plans that
auto_explain logs for its nested statements (the distributed suites read
them to see how a query was split)."""


def notices_during(conn, run, setup, reset, pick):
    """run() with the session set up by the SQL setup (reset after): its
    result, and pick(diag) of every notice it raised that pick keeps
    (returns other than None)."""
    got = []

    def on_notice(diag):
        v = pick(diag)
        if v is not None:
            got.append(v)
    conn.add_notice_handler(on_notice)
    conn.execute(setup)
    try:
        result = run()
    finally:
        conn.execute(reset)
        conn.remove_notice_handler(on_notice)
    return result, got


def nested_plans(conn, run):
    """run() with auto_explain logging nested statements: their plans."""
    return notices_during(
        conn, run,
        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; "
        "SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off; "
        "SET auto_explain.log_nested_statements = on; SET client_min_messages = log",
        "RESET client_min_messages; SET auto_explain.log_min_duration = -1",
        lambda d: d.message_primary if d.severity_nonlocalized == "LOG"
        and "Query Text" in (d.message_primary or "") else None)
