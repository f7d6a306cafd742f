// SPDX-License-Identifier: MIT
// Node.js http server and client for tests/integration/test_runtimes.py.
//
//   node http_echo.js server
//       listens on 127.0.0.1:0 and prints "listening PORT".  GET /hello
//       answers a short text; POST /echo answers the body it got, with its
//       sha256 in the x-sha256 header.  Exits 0 on SIGTERM after closing.
//   node http_echo.js client PORT [REQUESTS] [BIG_BYTES]
//       a keep-alive agent with 8 sockets: REQUESTS requests (alternately
//       GET /hello and POST /echo of a random 1..32 KiB body, each echo
//       compared), at most 32 outstanding, then one POST of BIG_BYTES random
//       bytes whose echo is checked by sha256.  Prints
//       "result ok=.. errors=.. requests=.. sockets=.. bytes=.. secs=..
//       req_per_s=.. mb_per_s=.." and exits 0 iff all came back right.
'use strict';
const http = require('http');
const crypto = require('crypto');

function server() {
  let requests = 0;
  const srv = http.createServer((req, res) => {
    requests++;
    if (req.method === 'GET' && req.url === '/hello') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('hello from node\n');
      return;
    }
    if (req.method === 'POST' && req.url === '/echo') {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const h = crypto.createHash('sha256').update(body).digest('hex');
        res.writeHead(200, { 'content-type': 'application/octet-stream',
                             'content-length': body.length, 'x-sha256': h });
        res.end(body);
      });
      return;
    }
    res.writeHead(404);
    res.end();
  });
  srv.keepAliveTimeout = 60000;
  srv.listen(0, '127.0.0.1', () => {
    console.log(`listening ${srv.address().port}`);
  });
  process.on('SIGTERM', () => {
    console.log(`server requests=${requests}`);
    srv.close(() => process.exit(0));
    srv.closeAllConnections();
  });
}

function request(agent, port, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent,
                               headers: body ? { 'content-length': body.length } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers,
                                    body: Buffer.concat(chunks), socket: req.socket }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}

async function client(port, n, big) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const sockets = new Set();
  const errors = [];
  let bytes = 0;
  let done = 0;
  const t0 = process.hrtime.bigint();
  let next = 0;
  async function worker() {
    while (next < n) {
      const i = next++;
      try {
        if (i % 2 === 0) {
          const r = await request(agent, port, 'GET', '/hello');
          sockets.add(r.socket);
          if (r.status !== 200 || r.body.toString() !== 'hello from node\n')
            errors.push(`GET ${i}: status ${r.status}, body ${JSON.stringify(r.body.toString().slice(0, 80))}`);
          bytes += r.body.length;
        } else {
          const body = crypto.randomBytes(1 + crypto.randomInt(32 * 1024));
          const r = await request(agent, port, 'POST', '/echo', body);
          sockets.add(r.socket);
          if (r.status !== 200 || !r.body.equals(body))
            errors.push(`POST ${i}: status ${r.status}, ${r.body.length} bytes back of ${body.length}`);
          bytes += 2 * body.length;
        }
      } catch (e) {
        errors.push(`request ${i}: ${e}`);
      }
      done++;
    }
  }
  const timer = setTimeout(() => {
    console.log(`hang: ${done} of ${n} requests done after 60 s`);
    process.exit(3);
  }, 60000);
  await Promise.all(Array.from({ length: 32 }, worker));
  if (big > 0) {
    const body = crypto.randomBytes(big);
    const want = crypto.createHash('sha256').update(body).digest('hex');
    try {
      const r = await request(agent, port, 'POST', '/echo', body);
      const got = crypto.createHash('sha256').update(r.body).digest('hex');
      if (r.status !== 200 || got !== want || r.headers['x-sha256'] !== want)
        errors.push(`big POST: status ${r.status}, ${r.body.length} of ${big} bytes, sha256 ${got} ` +
                    `(server saw ${r.headers['x-sha256']}) want ${want}`);
      bytes += 2 * big;
    } catch (e) {
      errors.push(`big POST: ${e}`);
    }
  }
  clearTimeout(timer);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  agent.destroy();
  for (const e of errors.slice(0, 20)) console.log(`error: ${e}`);
  console.log(`result ok=${errors.length === 0} errors=${errors.length} requests=${n + (big > 0 ? 1 : 0)} ` +
              `sockets=${sockets.size} bytes=${bytes} secs=${secs.toFixed(3)} ` +
              `req_per_s=${(n / secs).toFixed(0)} mb_per_s=${(bytes / secs / 1e6).toFixed(1)}`);
  process.exitCode = errors.length === 0 ? 0 : 1;
}

const [mode, port, n, big] = process.argv.slice(2);
if (mode === 'server') server();
else if (mode === 'client') client(Number(port), Number(n || 4000), Number(big || (16 << 20)));
else { console.error('usage: node http_echo.js server | client PORT [REQUESTS] [BIG]'); process.exit(2); }
