// SPDX-License-Identifier: MIT
//! An axum HTTP server and a reqwest client for tests/integration/test_apps.py
//! (row "axum") and bench/apps.py.
//!
//!   rt-http server
//!       axum on 127.0.0.1:0 (prints "listening PORT"), hyper's HTTP/1.1:
//!       GET /hello answers a short text, POST /echo the body it got,
//!       GET /count the number of requests served before it.
//!   rt-http client PORT [--conns C] [--requests N] [--big BYTES] [--seed X]
//!       reqwest (hyper's client, a keep-alive pool): C tasks at once, N
//!       requests in all, alternately GET /hello and POST /echo of a random
//!       1..32 KiB body (compared byte for byte), then one POST of BYTES
//!       (FNV-1a hash compared), then GET /count, which must equal the
//!       requests made.  Prints "result ok=.. errors=.. requests=.. bytes=..
//!       secs=.. req_per_s=.." and exits 0 iff every answer was right; 3 if
//!       the run takes more than 60 s (a hang).
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

static SERVED: AtomicU64 = AtomicU64::new(0);

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

fn fnv(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, dflt: T) -> T {
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad value for {name}")),
        None => dflt,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let code = match args.get(1).map(String::as_str) {
        Some("server") => server().await,
        Some("client") => client(&args).await,
        _ => {
            eprintln!("usage: rt-http server | client PORT [...]");
            2
        }
    };
    std::process::exit(code);
}

async fn server() -> i32 {
    let app = Router::new()
        .route(
            "/hello",
            get(|| async {
                SERVED.fetch_add(1, Ordering::Relaxed);
                "hello from axum\n"
            }),
        )
        .route(
            "/echo",
            post(|body: Bytes| async move {
                SERVED.fetch_add(1, Ordering::Relaxed);
                body
            }),
        )
        .route(
            "/count",
            get(|| async { SERVED.load(Ordering::Relaxed).to_string() }),
        )
        .layer(DefaultBodyLimit::max(256 << 20));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    println!("listening {}", l.local_addr().unwrap().port());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    match axum::serve(l, app).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("serve: {e}");
            1
        }
    }
}

async fn one(
    c: &reqwest::Client,
    base: &str,
    i: usize,
    rng: &mut Rng,
) -> Result<u64, String> {
    if i % 2 == 0 {
        let r = c
            .get(format!("{base}/hello"))
            .send()
            .await
            .map_err(|e| format!("GET /hello #{i}: {e}"))?;
        let st = r.status();
        let b = r.bytes().await.map_err(|e| format!("GET /hello #{i} body: {e}"))?;
        if st != 200 || &b[..] != b"hello from axum\n" {
            return Err(format!("GET /hello #{i}: {st} {:?}", &b[..b.len().min(64)]));
        }
        Ok(b.len() as u64)
    } else {
        let n = 1 + (rng.next() as usize) % (32 << 10);
        let mut out = vec![0u8; n];
        rng.fill(&mut out);
        let r = c
            .post(format!("{base}/echo"))
            .body(out.clone())
            .send()
            .await
            .map_err(|e| format!("POST /echo #{i}: {e}"))?;
        let st = r.status();
        let b = r.bytes().await.map_err(|e| format!("POST /echo #{i} body: {e}"))?;
        if st != 200 || b[..] != out[..] {
            return Err(format!("POST /echo #{i} of {n} bytes: {st}, {} bytes back, equal {}",
                               b.len(), b[..] == out[..]));
        }
        Ok(2 * n as u64)
    }
}

async fn client(args: &[String]) -> i32 {
    let port: u16 = args.get(2).and_then(|p| p.parse().ok()).expect("client PORT");
    let conns: usize = arg(args, "--conns", 8);
    let requests: usize = arg(args, "--requests", 4000);
    let bigsz: usize = arg(args, "--big", 8 << 20);
    let seed: u64 = arg(args, "--seed", 1);
    let base = format!("http://127.0.0.1:{port}");
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(conns)
        .tcp_nodelay(true)
        .build()
        .expect("client");
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let work = {
        let (c, base, next, done) = (c.clone(), base.clone(), next.clone(), done.clone());
        async move {
            let mut tasks = Vec::new();
            for t in 0..conns {
                let (c, base, next, done) = (c.clone(), base.clone(), next.clone(), done.clone());
                tasks.push(tokio::spawn(async move {
                    let mut rng = Rng(seed ^ ((t as u64 + 1) * 0x9E37_79B9_7F4A_7C15));
                    let mut bytes = 0u64;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= requests {
                            return Ok(bytes);
                        }
                        bytes += one(&c, &base, i, &mut rng).await?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            let mut errors: Vec<String> = Vec::new();
            let mut bytes = 0u64;
            for t in tasks {
                match t.await {
                    Ok(Ok(b)) => bytes += b,
                    Ok(Err(e)) => errors.push(e),
                    Err(e) => errors.push(format!("task: {e}")),
                }
            }
            let mut made = requests as u64;
            if bigsz > 0 {
                let mut body = vec![0u8; bigsz];
                Rng(seed ^ 0xB16).fill(&mut body);
                let want = fnv(&body);
                made += 1;
                match c.post(format!("{base}/echo")).body(body).send().await {
                    Ok(r) => match r.bytes().await {
                        Ok(b) if b.len() == bigsz && fnv(&b) == want => bytes += 2 * bigsz as u64,
                        Ok(b) => errors.push(format!("big POST: {} bytes back of {bigsz}, hash {:016x} != {want:016x}",
                                                     b.len(), fnv(&b))),
                        Err(e) => errors.push(format!("big POST body: {e}")),
                    },
                    Err(e) => errors.push(format!("big POST: {e}")),
                }
            }
            match c.get(format!("{base}/count")).send().await {
                Ok(r) => match r.text().await {
                    Ok(t) if t.trim() == made.to_string() => {}
                    Ok(t) => errors.push(format!("server served {} requests, the client made {made}", t.trim())),
                    Err(e) => errors.push(format!("GET /count body: {e}")),
                },
                Err(e) => errors.push(format!("GET /count: {e}")),
            }
            (errors, bytes)
        }
    };
    let (errors, bytes) = match tokio::time::timeout(Duration::from_secs(60), work).await {
        Ok(x) => x,
        Err(_) => {
            println!("hang: no result after 60 s; {} of {requests} requests done",
                     done.load(Ordering::Relaxed));
            return 3;
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    for e in errors.iter().take(20) {
        println!("error: {e}");
    }
    println!(
        "result ok={} errors={} requests={} bytes={} secs={:.3} req_per_s={:.0}",
        errors.is_empty(),
        errors.len(),
        done.load(Ordering::Relaxed),
        bytes,
        secs,
        requests as f64 / secs
    );
    if errors.is_empty() { 0 } else { 1 }
}
