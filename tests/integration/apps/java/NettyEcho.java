// SPDX-License-Identifier: MIT
// Netty with its native epoll transport (netty-transport-native-epoll,
// linux-x86_64) for tests/integration/test_apps.py (row "netty") and
// bench/apps.py.  The jars come from pom.xml beside this file; it builds
// against Netty 4.1 and 4.2 alike (EpollEventLoopGroup: 4.2 deprecates it
// for MultiThreadIoEventLoopGroup, same transport).  The two lines differ
// where it matters here: 4.1 adds a client's socket to its epoll set when
// the channel registers, before connect(); 4.2 after.
//
//   java NettyEcho server [CONNS]
//       EpollServerSocketChannel on 127.0.0.1:0 (prints "listening PORT"),
//       echoes every connection until its peer closes; with CONNS exits 0
//       after that many connections ended ("server conns=N bytes=B
//       errors=E").
//   java NettyEcho client PORT CONNS MESSAGES SIZE BIG LIMIT_S
//       EpollSocketChannel: CONNS connections at once, each MESSAGES
//       round trips of SIZE random bytes (the echo compared), then one
//       connection streaming BIG random bytes while it reads the echo
//       (SHA-256 compared).  Prints "result ok=.. errors=.. messages=..
//       bytes=.. secs=.. msg_per_s=.." and exits 0 iff every byte came back
//       right; if the run is not over after LIMIT_S seconds it prints each
//       connection's progress and exits 3.
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.SocketChannel;
import java.net.InetSocketAddress;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

public class NettyEcho {
    static final ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();

    public static void main(String[] a) throws Exception {
        Epoll.ensureAvailability();      // the native transport, or an error naming why not
        if (a.length >= 1 && a[0].equals("server"))
            server(a.length > 1 ? Integer.parseInt(a[1]) : 0);
        else if (a.length == 7 && a[0].equals("client"))
            client(Integer.parseInt(a[1]), Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                   Integer.parseInt(a[4]), Integer.parseInt(a[5]), Integer.parseInt(a[6]));
        else {
            System.err.println("usage: NettyEcho server [CONNS] | client PORT CONNS MESSAGES SIZE BIG LIMIT_S");
            System.exit(2);
        }
    }

    static void server(int want) throws Exception {
        EventLoopGroup boss = new EpollEventLoopGroup(1);
        EventLoopGroup work = new EpollEventLoopGroup(2);
        AtomicInteger ended = new AtomicInteger();
        AtomicLong bytes = new AtomicLong();
        ServerBootstrap b = new ServerBootstrap().group(boss, work).channel(EpollServerSocketChannel.class)
            .childOption(ChannelOption.TCP_NODELAY, true)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel ch) {
                    ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                        @Override
                        public void channelRead(ChannelHandlerContext ctx, Object msg) {
                            bytes.addAndGet(((ByteBuf) msg).readableBytes());
                            ctx.write(msg);
                        }

                        @Override
                        public void channelReadComplete(ChannelHandlerContext ctx) {
                            ctx.flush();
                        }

                        @Override
                        public void exceptionCaught(ChannelHandlerContext ctx, Throwable e) {
                            errors.add("server: " + e);
                            ctx.close();
                        }

                        @Override
                        public void channelInactive(ChannelHandlerContext ctx) {
                            if (ended.incrementAndGet() == want) {
                                for (String e : errors)
                                    System.err.println(e);
                                System.out.printf("server conns=%d bytes=%d errors=%d%n", want, bytes.get(),
                                                  errors.size());
                                System.out.flush();
                                System.exit(errors.isEmpty() ? 0 : 1);
                            }
                        }
                    });
                }
            });
        InetSocketAddress at = (InetSocketAddress) b.bind("127.0.0.1", 0).sync().channel().localAddress();
        System.out.println("listening " + at.getPort());
        System.out.flush();
    }

    // one connection: MESSAGES round trips of SIZE bytes, one outstanding
    static final class PingPong extends ChannelInboundHandlerAdapter {
        final int id, messages, size;
        final CountDownLatch latch;
        final AtomicLong progress;
        final Random rnd;
        final byte[] cur, got;
        ByteBuf acc;
        int done;
        boolean over;

        PingPong(int id, int messages, int size, CountDownLatch latch, AtomicLong progress) {
            this.id = id;
            this.messages = messages;
            this.size = size;
            this.latch = latch;
            this.progress = progress;
            rnd = new Random(0x5eed + id);
            cur = new byte[size];
            got = new byte[size];
        }

        void send(ChannelHandlerContext ctx) {
            rnd.nextBytes(cur);
            ctx.writeAndFlush(Unpooled.wrappedBuffer(cur.clone()));
        }

        void end(ChannelHandlerContext ctx, String error) {
            if (over)
                return;
            over = true;
            if (error != null)
                errors.add("conn " + id + ": " + error);
            if (ctx != null)         // null: the connect failed
                ctx.close();
            latch.countDown();
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            acc = ctx.alloc().buffer(2 * size);
            send(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            acc.writeBytes(in);
            in.release();
            while (!over && acc.readableBytes() >= size) {
                acc.readBytes(got);
                if (!Arrays.equals(cur, got)) {
                    end(ctx, "echo of message " + done + " differs");
                    return;
                }
                done++;
                progress.incrementAndGet();
                if (done == messages)
                    end(ctx, null);
                else
                    send(ctx);
            }
            acc.discardReadBytes();
            if (!over && acc.readableBytes() > 0 && acc.readableBytes() >= size)
                end(ctx, "more bytes than sent");
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable e) {
            end(ctx, e.toString());
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (acc != null)
                acc.release();
            end(ctx, "closed by the server after " + done + " of " + messages + " messages");
        }
    }

    // one connection streaming BIG bytes while it reads the echo
    static final class Stream extends ChannelInboundHandlerAdapter {
        final long big;
        final CountDownLatch latch;
        final AtomicLong progress;
        final MessageDigest sent, back;
        long got;
        boolean over;

        Stream(long big, CountDownLatch latch, AtomicLong progress) throws Exception {
            this.big = big;
            this.latch = latch;
            this.progress = progress;
            sent = MessageDigest.getInstance("SHA-256");
            back = MessageDigest.getInstance("SHA-256");
        }

        void end(ChannelHandlerContext ctx, String error) {
            if (over)
                return;
            over = true;
            if (error != null)
                errors.add("stream: " + error);
            if (ctx != null)         // null: the connect failed
                ctx.close();
            latch.countDown();
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            Random rnd = new Random(0xB16);
            for (long left = big; left > 0; ) {
                byte[] c = new byte[(int) Math.min(left, 64 << 10)];
                rnd.nextBytes(c);
                sent.update(c);
                ctx.write(Unpooled.wrappedBuffer(c));
                left -= c.length;
            }
            ctx.flush();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            byte[] b = new byte[in.readableBytes()];
            in.readBytes(b);
            in.release();
            back.update(b);
            got += b.length;
            progress.set(got);
            if (got > big)
                end(ctx, got + " bytes echoed of " + big);
            else if (got == big) {
                String s = HexFormat.of().formatHex(sent.digest()), r = HexFormat.of().formatHex(back.digest());
                end(ctx, s.equals(r) ? null : "echo SHA-256 " + r + " != sent " + s);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable e) {
            end(ctx, e.toString());
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            end(ctx, "closed by the server after " + got + " of " + big + " bytes");
        }
    }

    static void client(int port, int conns, int messages, int size, int big, int limit) throws Exception {
        EventLoopGroup g = new EpollEventLoopGroup(2);
        CountDownLatch latch = new CountDownLatch(conns);
        AtomicLong[] progress = new AtomicLong[conns + 1];
        for (int i = 0; i <= conns; i++)
            progress[i] = new AtomicLong();
        long t0 = System.nanoTime();
        for (int i = 0; i < conns; i++) {
            final int id = i;
            connect(g, port, new PingPong(id, messages, size, latch, progress[id]));
        }
        boolean ok = latch.await(limit, TimeUnit.SECONDS);
        double rtSecs = (System.nanoTime() - t0) / 1e9;
        if (ok && big > 0) {
            CountDownLatch one = new CountDownLatch(1);
            connect(g, port, new Stream(big, one, progress[conns]));
            ok = one.await(Math.max(1, t0 + limit * 1_000_000_000L - System.nanoTime()), TimeUnit.NANOSECONDS);
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        if (!ok) {
            StringBuilder p = new StringBuilder();
            for (int i = 0; i < conns; i++)
                p.append(i == 0 ? "" : ",").append(progress[i].get());
            System.out.printf("hang: not over after %d s; messages echoed per connection [%s] of %d, "
                              + "stream bytes echoed %d of %d%n", limit, p, messages, progress[conns].get(), big);
            for (String e : errors)
                System.out.println("error: " + e);
            System.out.flush();
            Runtime.getRuntime().halt(3);
        }
        long total = 0;
        for (int i = 0; i < conns; i++)
            total += progress[i].get();
        for (String e : errors)
            System.out.println("error: " + e);
        System.out.printf("result ok=%b errors=%d messages=%d bytes=%d secs=%.3f msg_per_s=%.0f%n",
                          errors.isEmpty(), errors.size(), total, 2 * (total * size + big), secs,
                          total / rtSecs);
        System.out.flush();
        g.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
        System.exit(errors.isEmpty() ? 0 : 1);
    }

    static void connect(EventLoopGroup g, int port, ChannelInboundHandlerAdapter h) {
        new Bootstrap().group(g).channel(EpollSocketChannel.class).option(ChannelOption.TCP_NODELAY, true)
            .handler(h).connect("127.0.0.1", port).addListener(f -> {
                if (!f.isSuccess())
                    h.exceptionCaught(null, f.cause());
            });
    }
}
