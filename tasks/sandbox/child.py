"""Trusted child entry point: `python -s -P -B child.py JOB.json`.

Protocol: the job file (written by the evaluator, deleted here once read) holds the code,
the test inputs (never the expected outputs: the verdict is computed by the evaluator) and
the sandbox settings. Results go back as JSON lines on the original stdout, which is moved
to a private descriptor; fds 0-2 are re-pointed so the program cannot write into it by
accident. Messages: {"hello": flags}, {"compile_error": msg}, {"test": i, "status": ...,
"output": ..., "error": ..., "time": s}, {"done": true}, {"runner_error": traceback}.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.path.insert(0, HERE)
    import confine
    import programs
    sys.path.remove(HERE)  # the untrusted program must not shadow-import from here
    confine.die_with_parent()

    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    os.unlink(sys.argv[1])
    chan = os.fdopen(os.dup(1), "wb")  # dup'd fds are non-inheritable
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    max_msg = job["max_message_bytes"]

    dumps = json.dumps  # bound now: the program may tamper with the json module later

    def send(msg):
        data = dumps(msg, ensure_ascii=False).encode("utf-8", "replace") + b"\n"
        if len(data) > max_msg:  # a print bomb must not become a huge message
            msg = {k: v for k, v in msg.items() if k not in ("output", "error")}
            msg.update(status="output_limit", error=f"result over {max_msg} bytes")
            data = dumps(msg).encode() + b"\n"
        chan.write(data)
        chan.flush()

    try:
        flags = confine.confine(job["sandbox"])
        send({"hello": flags})
        programs.run(job, send)
        send({"done": True})
    except BaseException:  # noqa: BLE001 - report anything, the evaluator decides
        import traceback
        try:
            send({"runner_error": traceback.format_exc()[-2000:]})
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            chan.flush()
        finally:
            os._exit(0)


if __name__ == "__main__":
    main()
