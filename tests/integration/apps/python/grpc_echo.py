#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Python gRPC (grpcio: its C core, its own epoll poller and HTTP/2) for
tests/integration/test_apps.py (row "grpc") and bench/apps.py. Raw-bytes
methods, no protobuf.

  grpc_echo.py server
      a grpc.server on 127.0.0.1:0 (prints "listening PORT"): /echo.Echo/Unary
      answers the request's bytes, /echo.Echo/Stream (bidirectional) answers
      each message with the same bytes, /echo.Echo/Count the calls and stream
      messages served so far.
  grpc_echo.py client PORT CALLS MESSAGES [LIMIT_S]
      CALLS unary calls of 1..4096 random bytes (the answer compared), then
      one bidirectional stream of MESSAGES messages (each answer compared, in
      order), then Count, which must equal what the client sent. Prints
      "result ok=.. errors=.. calls=.. messages=.. calls_per_s=..
      msg_per_s=.." and exits 0 iff every answer was right; 3 if the run is
      not over after LIMIT_S seconds (default 60: a hang), with its progress.
"""
import os
import random
import sys
import threading
import time
from concurrent import futures

import grpc

UNARY, STREAM, COUNT = "/echo.Echo/Unary", "/echo.Echo/Stream", "/echo.Echo/Count"


def server():
    lock = threading.Lock()
    served = {"calls": 0, "messages": 0}

    def unary(req, ctx):
        with lock:
            served["calls"] += 1
        return req

    def stream(reqs, ctx):
        for r in reqs:
            with lock:
                served["messages"] += 1
            yield r

    def count(req, ctx):
        with lock:
            return b"%d %d" % (served["calls"], served["messages"])

    handler = grpc.method_handlers_generic_handler("echo.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
        "Count": grpc.unary_unary_rpc_method_handler(count),
    })
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler],
                    options=[("grpc.so_reuseport", 0)])
    port = s.add_insecure_port("127.0.0.1:0")
    s.start()
    print(f"listening {port}", flush=True)
    s.wait_for_termination()


def client(port, calls, messages, limit):
    progress = {"calls": 0, "messages": 0}

    def watchdog():
        print(f"hang: not over after {limit} s; {progress['calls']} of {calls} calls, "
              f"{progress['messages']} of {messages} stream messages answered", flush=True)
        os._exit(3)

    t = threading.Timer(limit, watchdog)
    t.daemon = True
    t.start()
    errors = []
    rnd = random.Random(7)
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    unary = ch.unary_unary(UNARY)
    t0 = time.monotonic()
    for i in range(calls):
        req = rnd.randbytes(rnd.randint(1, 4096))
        got = unary(req, timeout=limit)
        if got != req:
            errors.append(f"call {i}: {len(got)} bytes back of {len(req)}, equal {got == req}")
            break
        progress["calls"] += 1
    t1 = time.monotonic()

    sent = []

    def requests():
        for i in range(messages):
            m = b"%08d" % i + bytes([i & 0xff]) * (i % 57)
            sent.append(m)
            yield m

    n = 0
    for got in ch.stream_stream(STREAM)(requests(), timeout=limit):
        if got != sent[n]:
            errors.append(f"stream message {n}: {got[:20]!r} != sent {sent[n][:20]!r}")
            break
        n += 1
        progress["messages"] = n
    t2 = time.monotonic()
    if n != messages and not errors:
        errors.append(f"stream: {n} answers of {messages}")
    served = ch.unary_unary(COUNT)(b"", timeout=limit).split()
    if [int(x) for x in served] != [calls, messages]:
        errors.append(f"server served {served[0].decode()} calls and {served[1].decode()} messages, "
                      f"the client sent {calls} and {messages}")
    ch.close()
    for e in errors:
        print("error:", e)
    print(f"result ok={not errors} errors={len(errors)} calls={progress['calls']} messages={n} "
          f"calls_per_s={calls / (t1 - t0):.0f} msg_per_s={messages / (t2 - t1):.0f}", flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["server"]:
        server()
    elif sys.argv[1:2] == ["client"] and len(sys.argv) in (5, 6):
        sys.exit(client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                        float(sys.argv[5]) if len(sys.argv) == 6 else 60.0))
    else:
        sys.exit(__doc__)
