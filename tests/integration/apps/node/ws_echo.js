// SPDX-License-Identifier: MIT
// Node.js WebSocket echo with the ws package (npm ci into build/apps/node;
// NODE_PATH=build/apps/node/node_modules) for tests/integration/test_apps.py
// (row "ws") and bench/apps.py.
//
//   node ws_echo.js server
//       a ws WebSocketServer on 127.0.0.1:0 (prints "listening PORT")
//       echoing each message, text or binary as it came; on SIGTERM prints
//       "server messages=N bytes=B" and exits.
//   node ws_echo.js client PORT CONNS MESSAGES BIG LIMIT_S
//       CONNS WebSockets at once, each sending MESSAGES text messages with
//       up to 32 unanswered (each echo compared, in order), then one binary
//       message of BIG random bytes (SHA-256 compared). Prints "result
//       ok=.. errors=.. messages=.. bytes=.. secs=.. msg_per_s=.." and exits
//       0 iff every echo was right; 3 if not over after LIMIT_S s (a hang),
//       with each connection's progress.
'use strict';
const crypto = require('crypto');
const { WebSocket, WebSocketServer } = require('ws');

function server() {
  let messages = 0, bytes = 0;
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false,
                                    maxPayload: 256 << 20 });
  wss.on('listening', () => console.log(`listening ${wss.address().port}`));
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      messages++;
      bytes += data.length;
      ws.send(data, { binary: isBinary });
    });
    ws.on('error', (e) => console.error(`server: ${e}`));
  });
  process.on('SIGTERM', () => {
    console.log(`server messages=${messages} bytes=${bytes}`);
    process.exit(0);
  });
}

function text(c, i) {
  return `${c}:${i}:` + 'abcdefghij'.repeat(i % 20);
}

function client(port, conns, messages, big, limit) {
  const errors = [];
  const progress = new Array(conns).fill(0);
  let bigDone = 0, bytes = 0, open = conns;
  const t0 = process.hrtime.bigint();
  let tMsgs = 0;
  const timer = setTimeout(() => {
    console.log(`hang: not over after ${limit} s; echoes per connection [${progress}] of ${messages}, ` +
                `big message echoed ${bigDone}`);
    for (const e of errors.slice(0, 20)) console.log(`error: ${e}`);
    process.exit(3);
  }, limit * 1000);
  const secs = (t) => Number(process.hrtime.bigint() - t) / 1e9;

  function finish() {
    clearTimeout(timer);
    const s = secs(t0);
    for (const e of errors.slice(0, 20)) console.log(`error: ${e}`);
    const total = progress.reduce((a, b) => a + b, 0);
    console.log(`result ok=${errors.length === 0} errors=${errors.length} messages=${total} bytes=${bytes} ` +
                `secs=${s.toFixed(3)} msg_per_s=${(total / tMsgs).toFixed(0)}`);
    process.exit(errors.length ? 1 : 0);
  }

  function bigOne() {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false, maxPayload: 256 << 20 });
    const body = crypto.randomBytes(big);
    const want = crypto.createHash('sha256').update(body).digest('hex');
    ws.on('open', () => ws.send(body, { binary: true }));
    ws.on('message', (data, isBinary) => {
      const got = crypto.createHash('sha256').update(data).digest('hex');
      bigDone = data.length;
      if (!isBinary || data.length !== big || got !== want)
        errors.push(`big: ${data.length} bytes back of ${big}, binary ${isBinary}, sha256 ${got} != ${want}`);
      bytes += 2 * big;
      ws.close();
    });
    ws.on('close', finish);
    ws.on('error', (e) => { errors.push(`big: ${e}`); finish(); });
  }

  for (let c = 0; c < conns; c++) {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/`, { perMessageDeflate: false });
    let sent = 0, over = false;
    const send = () => {
      while (sent < messages && sent - progress[c] < 32) {
        ws.send(text(c, sent));
        sent++;
      }
    };
    const end = (err) => {
      if (over) return;
      over = true;
      if (err) errors.push(`conn ${c}: ${err}`);
      ws.close();
      if (--open === 0) {
        tMsgs = secs(t0);
        if (big > 0 && errors.length === 0) bigOne(); else finish();
      }
    };
    ws.on('open', send);
    ws.on('message', (data, isBinary) => {
      const want = text(c, progress[c]);
      if (isBinary || data.toString() !== want)
        return end(`echo ${progress[c]} was ${JSON.stringify(data.toString().slice(0, 40))}, ` +
                   `expected ${JSON.stringify(want.slice(0, 40))}`);
      bytes += 2 * data.length;
      if (++progress[c] === messages) end(null); else send();
    });
    ws.on('close', () => end(progress[c] === messages ? null : `closed after ${progress[c]} echoes`));
    ws.on('error', (e) => end(String(e)));
  }
}

const a = process.argv.slice(2);
if (a[0] === 'server') server();
else if (a[0] === 'client' && a.length === 6)
  client(+a[1], +a[2], +a[3], +a[4], +a[5]);
else {
  console.error('usage: node ws_echo.js server | client PORT CONNS MESSAGES BIG LIMIT_S');
  process.exit(2);
}
