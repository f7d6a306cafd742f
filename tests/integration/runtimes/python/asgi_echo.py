# SPDX-License-Identifier: MIT
"""uvicorn serving an ASGI echo app, and an httpx.AsyncClient, for
tests/integration/test_runtimes.py.

    python3 asgi_echo.py server
        uvicorn (asyncio loop, h11) on 127.0.0.1:0; prints "listening PORT".
        GET /hello answers a short text, POST /echo the body it got (its
        SHA-256 in the x-sha256 header).
    python3 asgi_echo.py client PORT [REQUESTS] [BIG_BYTES]
        httpx.AsyncClient with a pool of 8 keep-alive connections: REQUESTS
        requests, 8 at a time, alternately GET /hello and POST /echo of a
        random 1..32 KiB body (compared), then one POST of BIG_BYTES checked
        by SHA-256.  Prints "result ok=.. errors=.. requests=.. bytes=..
        secs=.. req_per_s=.. mb_per_s=.." and exits 0 iff all came back
        right; 3 after 60 s (a hang)."""
import asyncio
import hashlib
import os
import random
import socket
import sys
import time


async def app(scope, receive, send):
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                if m["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif m["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        return
    body = bytearray()
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    if scope["method"] == "GET" and scope["path"] == "/hello":
        out, headers = b"hello from uvicorn\n", [(b"content-type", b"text/plain")]
    elif scope["method"] == "POST" and scope["path"] == "/echo":
        out = bytes(body)
        headers = [(b"content-type", b"application/octet-stream"),
                   (b"x-sha256", hashlib.sha256(out).hexdigest().encode())]
    else:
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    headers.append((b"content-length", str(len(out)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


def server():
    import uvicorn
    # proto IPPROTO_TCP as getaddrinfo gives it when uvicorn binds itself:
    # asyncio sets TCP_NODELAY only on sockets that say so
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    config = uvicorn.Config(app, loop="asyncio", http="h11", lifespan="on", log_level="warning",
                            access_log=False)
    srv = uvicorn.Server(config)

    orig_startup = srv.startup

    async def startup(sockets=None):
        await orig_startup(sockets=sockets)
        print(f"listening {port}", flush=True)
    srv.startup = startup
    srv.run(sockets=[s])


async def client(port, n, big):
    import httpx
    errors, done, nbytes = [], 0, 0
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
    t0 = time.monotonic()
    rnd = random.Random(7)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=None) as c:
        it = iter(range(n))

        async def worker():
            nonlocal done, nbytes
            for i in it:
                try:
                    if i % 2 == 0:
                        r = await c.get("/hello")
                        if r.status_code != 200 or r.content != b"hello from uvicorn\n":
                            errors.append(f"GET {i}: status {r.status_code} body {r.content[:80]!r}")
                        nbytes += len(r.content)
                    else:
                        body = rnd.randbytes(rnd.randint(1, 32 * 1024))
                        r = await c.post("/echo", content=body)
                        if r.status_code != 200 or r.content != body:
                            errors.append(f"POST {i}: status {r.status_code}, {len(r.content)} bytes "
                                          f"back of {len(body)}")
                        nbytes += 2 * len(body)
                except Exception as e:      # the verdict counts it
                    errors.append(f"request {i}: {e!r}")
                done += 1

        await asyncio.gather(*(worker() for _ in range(8)))
        if big:
            body = os.urandom(big)
            want = hashlib.sha256(body).hexdigest()
            try:
                r = await c.post("/echo", content=body)
                got = hashlib.sha256(r.content).hexdigest()
                if r.status_code != 200 or got != want or r.headers.get("x-sha256") != want:
                    errors.append(f"big POST: status {r.status_code}, {len(r.content)} of {big} bytes, "
                                  f"sha256 {got} (server saw {r.headers.get('x-sha256')}) want {want}")
                nbytes += 2 * big
            except Exception as e:
                errors.append(f"big POST: {e!r}")
    secs = time.monotonic() - t0
    for e in errors[:20]:
        print("error:", e)
    print(f"result ok={not errors} errors={len(errors)} requests={n + bool(big)} bytes={nbytes} "
          f"secs={secs:.3f} req_per_s={n / secs:.0f} mb_per_s={nbytes / secs / 1e6:.1f}", flush=True)
    return 0 if not errors else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "server":
        server()
    elif len(sys.argv) > 2 and sys.argv[1] == "client":
        port = int(sys.argv[2])
        n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
        big = int(sys.argv[4]) if len(sys.argv) > 4 else 8 << 20

        async def guarded():
            try:
                return await asyncio.wait_for(client(port, n, big), 60)
            except asyncio.TimeoutError:
                print("hang: no result after 60 s", flush=True)
                return 3
        sys.exit(asyncio.run(guarded()))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
