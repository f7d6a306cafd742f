// SPDX-License-Identifier: MIT
// Java servers and clients for tests/integration/test_runtimes.py.
//
//   java Rt http-server
//       com.sun.net.httpserver.HttpServer on 127.0.0.1:0 (prints
//       "listening PORT"); GET /hello answers a short text, POST /echo the
//       body it got (its SHA-256 in the X-Sha256 header).
//   java Rt http-client PORT [REQUESTS] [BIG_BYTES]
//       java.net.http.HttpClient (HTTP/1.1, its pool keeps connections):
//       REQUESTS requests, 16 outstanding, alternately GET /hello and POST
//       /echo of a random 1..32 KiB body (compared), then one POST of
//       BIG_BYTES random bytes checked by SHA-256.
//   java Rt sock-server
//       ServerSocket on 127.0.0.1:0 (prints "listening PORT"), a thread per
//       connection echoing until EOF.
//   java Rt sock-client PORT [CONNS] [ROUNDS] [BIG_BYTES]
//       CONNS threads, each a java.net.Socket doing ROUNDS round trips of a
//       random 1..16 KiB (compared), then one connection streaming
//       BIG_BYTES while a second thread reads the echo (SHA-256 compared).
// Clients print "result ok=.. errors=.. ... secs=.. mb_per_s=.." and exit 0
// iff every byte came back right; 3 if the run took more than 60 s.
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public class Rt {
    static String sha(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    static void watchdog(String what, AtomicLong progress) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                return;
            }
            System.out.println("hang: " + what + " after 60 s, progress " + progress.get());
            System.out.flush();
            Runtime.getRuntime().halt(3);
        });
        t.setDaemon(true);
        t.start();
    }

    static void result(List<String> errors, String counts, long bytes, long t0) {
        double secs = (System.nanoTime() - t0) / 1e9;
        for (String e : errors.subList(0, Math.min(20, errors.size())))
            System.out.println("error: " + e);
        System.out.printf("result ok=%b errors=%d %s bytes=%d secs=%.3f mb_per_s=%.1f%n",
                          errors.isEmpty(), errors.size(), counts, bytes, secs, bytes / secs / 1e6);
        System.out.flush();
        System.exit(errors.isEmpty() ? 0 : 1);
    }

    static void httpServer() throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        s.createContext("/hello", ex -> {
            byte[] b = "hello from java\n".getBytes();
            ex.getRequestBody().readAllBytes();
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
            }
        });
        s.createContext("/echo", ex -> {
            byte[] b = ex.getRequestBody().readAllBytes();
            try {
                ex.getResponseHeaders().add("X-Sha256", sha(b));
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
            }
        });
        s.setExecutor(Executors.newFixedThreadPool(4));
        s.start();
        System.out.println("listening " + s.getAddress().getPort());
        System.out.flush();
    }

    static void httpClient(int port, int n, int big) throws Exception {
        AtomicLong progress = new AtomicLong();
        watchdog("http-client", progress);
        HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicLong bytes = new AtomicLong();
        Semaphore window = new Semaphore(16);
        Random rnd = new Random(7);
        String base = "http://127.0.0.1:" + port;
        long t0 = System.nanoTime();
        List<CompletableFuture<Void>> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            final int id = i;
            window.acquire();
            CompletableFuture<Void> f;
            if (i % 2 == 0) {
                HttpRequest r = HttpRequest.newBuilder(URI.create(base + "/hello")).GET().build();
                f = c.sendAsync(r, HttpResponse.BodyHandlers.ofString()).thenAccept(resp -> {
                    if (resp.statusCode() != 200 || !resp.body().equals("hello from java\n"))
                        errors.add("GET " + id + ": status " + resp.statusCode() + " body " + resp.body());
                    bytes.addAndGet(resp.body().length());
                });
            } else {
                byte[] body = new byte[1 + rnd.nextInt(32 * 1024)];
                rnd.nextBytes(body);
                HttpRequest r = HttpRequest.newBuilder(URI.create(base + "/echo"))
                        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build();
                f = c.sendAsync(r, HttpResponse.BodyHandlers.ofByteArray()).thenAccept(resp -> {
                    if (resp.statusCode() != 200 || !Arrays.equals(resp.body(), body))
                        errors.add("POST " + id + ": status " + resp.statusCode() + ", " + resp.body().length
                                   + " bytes back of " + body.length);
                    bytes.addAndGet(2L * body.length);
                });
            }
            all.add(f.handle((v, e) -> {
                if (e != null)
                    errors.add("request " + id + ": " + e);
                progress.incrementAndGet();
                window.release();
                return null;
            }));
        }
        CompletableFuture.allOf(all.toArray(new CompletableFuture[0])).join();
        if (big > 0) {
            byte[] body = new byte[big];
            rnd.nextBytes(body);
            String want = sha(body);
            try {
                HttpRequest r = HttpRequest.newBuilder(URI.create(base + "/echo"))
                        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build();
                HttpResponse<byte[]> resp = c.send(r, HttpResponse.BodyHandlers.ofByteArray());
                String got = sha(resp.body());
                String seen = resp.headers().firstValue("X-Sha256").orElse("none");
                if (resp.statusCode() != 200 || !got.equals(want) || !seen.equals(want))
                    errors.add("big POST: status " + resp.statusCode() + ", " + resp.body().length + " of " + big
                               + " bytes, sha256 " + got + " (server saw " + seen + ") want " + want);
                bytes.addAndGet(2L * big);
            } catch (Exception e) {
                errors.add("big POST: " + e);
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        result(new ArrayList<>(errors), String.format("requests=%d req_per_s=%.0f", n + (big > 0 ? 1 : 0), n / secs),
               bytes.get(), t0);
    }

    static void sockServer() throws Exception {
        ServerSocket ss = new ServerSocket(0, 128, InetAddress.getLoopbackAddress());
        System.out.println("listening " + ss.getLocalPort());
        System.out.flush();
        while (true) {
            Socket s = ss.accept();
            Thread t = new Thread(() -> {
                try (s) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] buf = new byte[64 * 1024];
                    int n;
                    while ((n = in.read(buf)) > 0)
                        out.write(buf, 0, n);
                } catch (Exception e) {
                    System.err.println("server: " + e);
                }
            });
            t.setDaemon(true);
            t.start();
        }
    }

    static void readFully(InputStream in, byte[] b, int n) throws Exception {
        int got = 0;
        while (got < n) {
            int r = in.read(b, got, n - got);
            if (r < 0)
                throw new Exception("EOF after " + got + " of " + n + " bytes");
            got += r;
        }
    }

    static void sockClient(int port, int conns, int rounds, int big) throws Exception {
        AtomicLong progress = new AtomicLong();
        watchdog("sock-client", progress);
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicLong bytes = new AtomicLong();
        long t0 = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < conns; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                Random rnd = new Random(1000 + id);
                byte[] out = new byte[16 * 1024], back = new byte[16 * 1024];
                int r = 0;
                try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
                    s.setTcpNoDelay(true);
                    InputStream in = s.getInputStream();
                    OutputStream o = s.getOutputStream();
                    for (r = 0; r < rounds; r++) {
                        int n = 1 + rnd.nextInt(out.length);
                        rnd.nextBytes(out);
                        o.write(out, 0, n);
                        readFully(in, back, n);
                        if (!Arrays.equals(out, 0, n, back, 0, n)) {
                            errors.add("conn " + id + " round " + r + ": echo of " + n + " bytes differs");
                            return;
                        }
                        bytes.addAndGet(2L * n);
                        progress.incrementAndGet();
                    }
                    s.shutdownOutput();
                    if (in.read() != -1)
                        errors.add("conn " + id + ": bytes after the echo");
                } catch (Exception e) {
                    errors.add("conn " + id + " round " + r + ": " + e);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads)
            t.join();
        if (big > 0) {
            try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
                byte[] data = new byte[big];
                new Random(99).nextBytes(data);
                String want = sha(data);
                MessageDigest md = MessageDigest.getInstance("SHA-256");
                long[] got = { 0 };
                Thread w = new Thread(() -> {
                    try {
                        OutputStream o = s.getOutputStream();
                        for (int off = 0; off < big; off += 256 * 1024)
                            o.write(data, off, Math.min(256 * 1024, big - off));
                        s.shutdownOutput();
                    } catch (Exception e) {
                        errors.add("big: write: " + e);
                    }
                });
                w.start();
                InputStream in = s.getInputStream();
                byte[] buf = new byte[128 * 1024];
                int n;
                while ((n = in.read(buf)) > 0) {
                    md.update(buf, 0, n);
                    got[0] += n;
                }
                w.join();
                String h = HexFormat.of().formatHex(md.digest());
                if (got[0] != big || !h.equals(want))
                    errors.add("big: " + got[0] + " of " + big + " bytes echoed, sha256 " + h + " want " + want);
                bytes.addAndGet(2L * big);
            } catch (Exception e) {
                errors.add("big: " + e);
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        result(new ArrayList<>(errors), String.format("conns=%d round_trips=%d rt_per_s=%.0f", conns + (big > 0 ? 1 : 0),
                                                      conns * rounds, conns * rounds / secs), bytes.get(), t0);
    }

    public static void main(String[] a) throws Exception {
        switch (a.length > 0 ? a[0] : "") {
            case "http-server" -> httpServer();
            case "http-client" -> httpClient(Integer.parseInt(a[1]), a.length > 2 ? Integer.parseInt(a[2]) : 4000,
                                             a.length > 3 ? Integer.parseInt(a[3]) : 16 << 20);
            case "sock-server" -> sockServer();
            case "sock-client" -> sockClient(Integer.parseInt(a[1]), a.length > 2 ? Integer.parseInt(a[2]) : 20,
                                             a.length > 3 ? Integer.parseInt(a[3]) : 200,
                                             a.length > 4 ? Integer.parseInt(a[4]) : 16 << 20);
            default -> {
                System.err.println("usage: java Rt http-server|http-client PORT|sock-server|sock-client PORT");
                System.exit(2);
            }
        }
    }
}
