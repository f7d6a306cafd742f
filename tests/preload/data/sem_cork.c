/* SPDX-License-Identifier: MIT */
/* TCP_CORK and MSG_MORE hold a partial write back from the reader: corked
 * bytes are not readable until the writer uncorks (or sets TCP_NODELAY,
 * which flushes once; later corked writes are held again), or until the
 * kernel's ceiling (about 200 ms) sends them anyway; with many corked
 * writes the full segments go out and only the tail waits.  A send with
 * MSG_MORE is held (even with TCP_NODELAY) until a send without it.  The
 * ceiling's time is counted from the client's send (it passes its clock
 * reading), not from when the server started to look. */
#include "common.h"

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int tcpopt(int fd, int opt, int v)
{
	return setsockopt(fd, IPPROTO_TCP, opt, &v, sizeof(v));
}

/* the server: is anything readable within ms? */
static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) > 0 && (p.revents & POLLIN);
}

/* the server: receive exactly n (waiting at most a second) and check them */
static void take(int fd, size_t n, unsigned seed, const char *what)
{
	char buf[4096];
	ssize_t r = recv_all(fd, buf, n);
	say("%s: got all %zu, intact: %s", what, n,
	    yesno(r == (ssize_t)n && ck(CK_INIT, buf, n) == pattern_ck(n, seed)));
	res("then nothing more (DONTWAIT)", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
}

#define BIGN 200001

static void server(int lfd)
{
	int fd = server_conn(lfd);
	static char buf[65536];

	/* (1) corked 100 bytes: held until uncork */
	tell();
	await_peer();                           /* client: cork, send 100 */
	say("(1) corked 100 readable within 80 ms: %s", yesno(readable(fd, 80)));
	tell();
	await_peer();                           /* client uncorked */
	say("(1) readable at once after uncork: %s", yesno(readable(fd, 100)));
	take(fd, 100, 1, "(1)");

	/* (2) corked 100 bytes, never uncorked: the ceiling sends them */
	tell();
	long t0 = (long)await_u64();            /* client: cork, send 100 (its clock then) */
	bool r = readable(fd, T_GUARD_MS);
	long dt = now_ms() - t0;
	say("(2) corked 100 readable, still corked, after 100..1000 ms: %s",
	    yesno(r && dt >= 100 && dt < 1000));
	take(fd, 100, 2, "(2)");
	tell();
	await_peer();                           /* client uncorked */

	/* (3) 200001 corked bytes, read as they come: all but the tail */
	tell();
	size_t got = 0;
	uint64_t h = CK_INIT;
	for (;;) {
		struct pollfd p[2] = { { .fd = t_c2p[0], .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };
		if (poll(p, 2, 1000) <= 0)
			break;
		if (p[1].revents) {
			ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (k > 0) {
				h = ck(h, buf, (size_t)k);
				got += (size_t)k;
			}
		}
		if (p[0].revents)
			break;                  /* the client's writes are done */
	}
	await_peer();
	t0 = now_ms();
	while (now_ms() - t0 < 40) {            /* what else comes soon */
		ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k > 0) {
			h = ck(h, buf, (size_t)k);
			got += (size_t)k;
		} else {
			msleep(2);
		}
	}
	say("(3) of 200001 corked bytes, some readable before uncork: %s", yesno(got > 0));
	say("(3) all of them readable before uncork: %s", yesno(got >= BIGN));
	tell();
	await_peer();                           /* client uncorked */
	say("(3) the rest readable at once after uncork: %s", yesno(readable(fd, 100)));
	while (got < BIGN) {
		ssize_t k = recv_all(fd, buf, BIGN - got < sizeof(buf) ? BIGN - got : sizeof(buf));
		if (k <= 0)
			break;
		h = ck(h, buf, (size_t)k);
		got += (size_t)k;
	}
	say("(3) got all 200001, intact: %s", yesno(got == BIGN && h == pattern_ck(BIGN, 3)));

	/* (4) TCP_NODELAY while corked flushes once */
	tell();
	await_peer();                           /* client: cork, send 100 */
	say("(4) corked 100 readable within 50 ms: %s", yesno(readable(fd, 50)));
	tell();
	await_peer();                           /* client set TCP_NODELAY */
	say("(4) readable at once after TCP_NODELAY=1: %s", yesno(readable(fd, 100)));
	take(fd, 100, 4, "(4)");
	tell();
	await_peer();                           /* client: still corked, 100 more */
	say("(4) next corked 100 (TCP_NODELAY on) readable within 50 ms: %s", yesno(readable(fd, 50)));
	tell();
	await_peer();                           /* client set TCP_NODELAY=1 again */
	say("(4) readable at once after TCP_NODELAY=1 again: %s", yesno(readable(fd, 100)));
	take(fd, 100, 5, "(4)");
	tell();
	await_peer();                           /* client uncorked, TCP_NODELAY=0 */

	/* (5) MSG_MORE, no cork */
	tell();
	await_peer();                           /* client: 100 with MSG_MORE */
	say("(5) 100 sent with MSG_MORE readable within 80 ms: %s", yesno(readable(fd, 80)));
	tell();
	await_peer();                           /* client: 10 without */
	say("(5) readable at once after a send without MSG_MORE: %s", yesno(readable(fd, 100)));
	take(fd, 110, 6, "(5)");

	/* (6) MSG_MORE with TCP_NODELAY on */
	tell();
	await_peer();                           /* client: NODELAY, 100 with MSG_MORE */
	say("(6) 100 sent with MSG_MORE and TCP_NODELAY readable within 80 ms: %s",
	    yesno(readable(fd, 80)));
	tell();
	await_peer();                           /* client: 10 without */
	say("(6) readable at once after a send without MSG_MORE: %s", yesno(readable(fd, 100)));
	take(fd, 110, 7, "(6)");
	tell();
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	static char buf[BIGN];
	int v;
	socklen_t vl = sizeof(v);

	/* (1) */
	await_peer();
	res("(1) setsockopt(TCP_CORK, 1)", tcpopt(fd, TCP_CORK, 1));
	res("(1) getsockopt(TCP_CORK)", getsockopt(fd, IPPROTO_TCP, TCP_CORK, &v, &vl));
	say("(1) TCP_CORK is %d", v);
	pattern(buf, 100, 0, 1);
	res("(1) send 100", send(fd, buf, 100, 0));
	tell();
	await_peer();
	res("(1) setsockopt(TCP_CORK, 0)", tcpopt(fd, TCP_CORK, 0));
	tell();

	/* (2) */
	await_peer();
	tcpopt(fd, TCP_CORK, 1);
	pattern(buf, 100, 0, 2);
	long t2 = now_ms();
	res("(2) corked send 100", send(fd, buf, 100, 0));
	tell_u64((uint64_t)t2);
	await_peer();
	tcpopt(fd, TCP_CORK, 0);
	tell();

	/* (3) */
	await_peer();
	tcpopt(fd, TCP_CORK, 1);
	pattern(buf, BIGN, 0, 3);
	size_t off = 0;
	while (off < BIGN) {
		size_t k = BIGN - off < 4000 ? BIGN - off : 4000;
		if (send_all(fd, buf + off, k) != (ssize_t)k)
			fatal("send");
		off += k;
	}
	say("(3) corked sends of 200001 done");
	tell();
	await_peer();
	res("(3) setsockopt(TCP_CORK, 0)", tcpopt(fd, TCP_CORK, 0));
	tell();

	/* (4) */
	await_peer();
	tcpopt(fd, TCP_CORK, 1);
	pattern(buf, 100, 0, 4);
	res("(4) corked send 100", send(fd, buf, 100, 0));
	tell();
	await_peer();
	res("(4) setsockopt(TCP_NODELAY, 1)", tcpopt(fd, TCP_NODELAY, 1));
	tell();
	await_peer();
	pattern(buf, 100, 0, 5);
	res("(4) corked send 100", send(fd, buf, 100, 0));
	tell();
	await_peer();
	res("(4) setsockopt(TCP_NODELAY, 1)", tcpopt(fd, TCP_NODELAY, 1));
	tell();
	await_peer();
	tcpopt(fd, TCP_CORK, 0);
	tcpopt(fd, TCP_NODELAY, 0);
	tell();

	/* (5) */
	await_peer();
	pattern(buf, 110, 0, 6);
	res("(5) send 100 MSG_MORE", send(fd, buf, 100, MSG_MORE));
	tell();
	await_peer();
	res("(5) send 10", send(fd, buf + 100, 10, 0));
	tell();

	/* (6) */
	await_peer();
	tcpopt(fd, TCP_NODELAY, 1);
	pattern(buf, 110, 0, 7);
	res("(6) send 100 MSG_MORE", send(fd, buf, 100, MSG_MORE));
	tell();
	await_peer();
	res("(6) send 10", send(fd, buf + 100, 10, 0));
	tell();
	await_peer();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
