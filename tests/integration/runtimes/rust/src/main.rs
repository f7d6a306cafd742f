// SPDX-License-Identifier: MIT
//! A tokio echo server and client for tests/integration/test_runtimes.py.
//!
//!   rt-echo server [--current-thread] [--conns N]
//!       binds 127.0.0.1:0, prints "listening PORT", echoes every connection
//!       until its peer shuts down; with --conns N exits 0 after N
//!       connections ended ("server conns=N bytes=B errors=E").
//!   rt-echo client PORT [--current-thread] [--conns C] [--rounds R]
//!       [--max-size S] [--big BYTES] [--seed X]
//!       C connections at once, each R round trips of a random size in
//!       1..=S (the echo is compared byte for byte), then one connection that
//!       streams BYTES while it reads the echo back (FNV-1a hash compared).
//!       Prints one line "result ok=.. errors=.. round_trips=.. bytes=..
//!       secs=.. mb_per_s=.. rt_per_s=.." and exits 0 iff every byte came
//!       back exact.  A watchdog prints each connection's progress and exits
//!       3 if the whole run takes more than 60 s (a hang).
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

fn fnv(h: u64, b: &[u8]) -> u64 {
    let mut h = h;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, dflt: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad value for {name}")),
        None => dflt,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let current = args.iter().any(|a| a == "--current-thread");
    let rt = if current {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let code = match args.get(1).map(String::as_str) {
        Some("server") => rt.block_on(server(&args)),
        Some("client") => rt.block_on(client(&args)),
        _ => {
            eprintln!("usage: rt-echo server|client ...");
            2
        }
    };
    std::process::exit(code);
}

async fn server(args: &[String]) -> i32 {
    let want: usize = arg(args, "--conns", 0);
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    println!("listening {}", l.local_addr().unwrap().port());
    let done = Arc::new(AtomicUsize::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    loop {
        let (mut s, _) = match l.accept().await {
            Ok(x) => x,
            Err(e) => {
                eprintln!("accept: {e}");
                errors.fetch_add(1, Ordering::SeqCst);
                continue;
            }
        };
        let (done, bytes, errors) = (done.clone(), bytes.clone(), errors.clone());
        tokio::spawn(async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match s.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => {
                        if let Err(e) = s.write_all(&buf[..n]).await {
                            eprintln!("server write: {e}");
                            errors.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        eprintln!("server read: {e}");
                        errors.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                }
            }
            let _ = s.shutdown().await;
            drop(s);
            let n = done.fetch_add(1, Ordering::SeqCst) + 1;
            if want > 0 && n == want {
                let errs = errors.load(Ordering::SeqCst);
                println!(
                    "server conns={} bytes={} errors={}",
                    n,
                    bytes.load(Ordering::SeqCst),
                    errs
                );
                use std::io::Write;
                let _ = std::io::stdout().flush();
                std::process::exit(if errs == 0 { 0 } else { 1 });
            }
        });
    }
}

async fn round_trips(
    port: u16,
    id: usize,
    rounds: usize,
    max: usize,
    seed: u64,
    progress: Arc<Vec<AtomicUsize>>,
) -> Result<u64, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("conn {id}: connect: {e}"))?;
    s.set_nodelay(true).ok();
    let mut rng = Rng(seed ^ ((id as u64 + 1) * 0x9E37_79B9_7F4A_7C15));
    let mut out = vec![0u8; max];
    let mut back = vec![0u8; max];
    let mut total = 0u64;
    for r in 0..rounds {
        let n = 1 + (rng.next() as usize) % max;
        rng.fill(&mut out[..n]);
        // write and read at once: a payload bigger than the socket buffers
        // must not deadlock against the echo
        let (mut rd, mut wr) = s.split();
        let w = wr.write_all(&out[..n]);
        let rd_fut = rd.read_exact(&mut back[..n]);
        let (wres, rres) = tokio::join!(w, rd_fut);
        wres.map_err(|e| format!("conn {id} round {r}: write: {e}"))?;
        rres.map_err(|e| format!("conn {id} round {r}: read {n} bytes: {e}"))?;
        if out[..n] != back[..n] {
            let at = (0..n).find(|&i| out[i] != back[i]).unwrap();
            return Err(format!(
                "conn {id} round {r}: echo of {n} bytes differs at byte {at}"
            ));
        }
        total += n as u64;
        progress[id].store(r + 1, Ordering::Relaxed);
    }
    s.shutdown()
        .await
        .map_err(|e| format!("conn {id}: shutdown: {e}"))?;
    let mut rest = [0u8; 16];
    match s.read(&mut rest).await {
        Ok(0) => Ok(total),
        Ok(n) => Err(format!("conn {id}: {n} unexpected bytes after the echo")),
        Err(e) => Err(format!("conn {id}: read EOF: {e}")),
    }
}

async fn big(
    port: u16,
    size: usize,
    seed: u64,
    progress: Arc<Vec<AtomicUsize>>,
    id: usize,
) -> Result<u64, String> {
    let s = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("big: connect: {e}"))?;
    let (mut rd, mut wr) = s.into_split();
    let writer = tokio::spawn(async move {
        let mut rng = Rng(seed ^ 0xB16);
        let mut h = FNV0;
        let mut left = size;
        let mut chunk = vec![0u8; 256 * 1024];
        while left > 0 {
            let n = left.min(chunk.len());
            rng.fill(&mut chunk[..n]);
            h = fnv(h, &chunk[..n]);
            wr.write_all(&chunk[..n])
                .await
                .map_err(|e| format!("big: write: {e}"))?;
            left -= n;
        }
        wr.shutdown()
            .await
            .map_err(|e| format!("big: shutdown: {e}"))?;
        Ok::<u64, String>(h)
    });
    let mut h = FNV0;
    let mut got = 0usize;
    let mut buf = vec![0u8; 128 * 1024];
    loop {
        let n = rd
            .read(&mut buf)
            .await
            .map_err(|e| format!("big: read after {got} bytes: {e}"))?;
        if n == 0 {
            break;
        }
        h = fnv(h, &buf[..n]);
        got += n;
        progress[id].store(got, Ordering::Relaxed);
    }
    let sent = writer
        .await
        .map_err(|e| format!("big: writer task: {e}"))??;
    if got != size {
        return Err(format!("big: {got} bytes echoed of {size}"));
    }
    if sent != h {
        return Err(format!("big: echo hash {h:016x} != sent {sent:016x}"));
    }
    Ok(size as u64)
}

async fn client(args: &[String]) -> i32 {
    let port: u16 = args
        .get(2)
        .and_then(|p| p.parse().ok())
        .expect("client PORT");
    let conns: usize = arg(args, "--conns", 20);
    let rounds: usize = arg(args, "--rounds", 200);
    let max: usize = arg(args, "--max-size", 16384);
    let bigsz: usize = arg(args, "--big", 4 << 20);
    let seed: u64 = arg(args, "--seed", 1);
    let progress: Arc<Vec<AtomicUsize>> =
        Arc::new((0..=conns).map(|_| AtomicUsize::new(0)).collect());
    let t0 = Instant::now();
    let work = {
        let progress = progress.clone();
        async move {
            let mut tasks = Vec::new();
            for id in 0..conns {
                tasks.push(tokio::spawn(round_trips(
                    port,
                    id,
                    rounds,
                    max,
                    seed,
                    progress.clone(),
                )));
            }
            let mut errors = Vec::new();
            let mut bytes = 0u64;
            for t in tasks {
                match t.await {
                    Ok(Ok(b)) => bytes += b,
                    Ok(Err(e)) => errors.push(e),
                    Err(e) => errors.push(format!("task: {e}")),
                }
            }
            if bigsz > 0 {
                match big(port, bigsz, seed, progress.clone(), conns).await {
                    Ok(b) => bytes += b,
                    Err(e) => errors.push(e),
                }
            }
            (errors, bytes)
        }
    };
    let (errors, bytes) = match tokio::time::timeout(Duration::from_secs(60), work).await {
        Ok(x) => x,
        Err(_) => {
            let p: Vec<usize> = progress.iter().map(|a| a.load(Ordering::Relaxed)).collect();
            println!("hang: no result after 60 s; round trips done per connection {:?}, big bytes echoed {}",
                     &p[..conns], p[conns]);
            return 3;
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    for e in &errors {
        println!("error: {e}");
    }
    // bytes: payload echoed (each byte went out and came back)
    println!(
        "result ok={} errors={} conns={} round_trips={} bytes={} secs={:.3} mb_per_s={:.1} rt_per_s={:.0}",
        errors.is_empty(),
        errors.len(),
        conns + (bigsz > 0) as usize,
        conns * rounds,
        bytes,
        secs,
        2.0 * bytes as f64 / secs / 1e6,
        (conns * rounds) as f64 / secs
    );
    if errors.is_empty() {
        0
    } else {
        1
    }
}
