/* SPDX-License-Identifier: MIT */
/* SO_RCVTIMEO with recv(MSG_WAITALL): the timeout bounds the call's total
 * waiting (each arriving piece does not restart it).  (a) all bytes arriving
 * in pieces within the timeout: the full count; (b) part of it, then the
 * writer pauses past the timeout: the partial count, after the timeout;
 * (c) pieces each sooner than the timeout but together later: a partial
 * count; (d) nothing at all: EAGAIN after the timeout; (e) part of it, then
 * the writer shuts down: the partial count at once, then 0.  A receive that
 * ignored the timeout would wait until the writer, after a second, sends the
 * rest.  Pieces that must come within the timeout are sent each once the
 * server sleeps in its receive (its thread's state), not at fixed gaps a
 * busy machine can stretch past it; the pieces of (c) keep their 100 ms
 * gaps (a lower bound: together they cannot come within the timeout), the
 * first of them once the server sleeps. */
#include "common.h"

#define TIMEO_MS 250
#define PIECE 1000

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* the server: one recv(WAITALL, n); returns it and its duration in *dt */
static ssize_t waitall(int fd, char *buf, size_t n, long *dt)
{
	long t0 = now_ms();
	ssize_t r = recv(fd, buf, n, MSG_WAITALL);
	int e = errno;
	*dt = now_ms() - t0;
	errno = e;
	return r;
}

/* the server: after a case, read what else the client sent (it reports the
 * total) and check all of it */
static void finish(int fd, char *buf, ssize_t got, unsigned seed, const char *what)
{
	size_t have = got > 0 ? (size_t)got : 0, total;
	uint64_t h = ck(CK_INIT, buf, have);

	tell();
	total = (size_t)await_u64();
	if (total > have) {
		size_t more = 0;
		char *rest = malloc(total - have);
		if (!rest)
			fatal("malloc");
		more = (size_t)recv_all(fd, rest, total - have);
		h = ck(h, rest, more);
		have += more;
		free(rest);
	}
	say("%s: all bytes received and intact: %s", what,
	    yesno(have == total && h == pattern_ck(total, seed)));
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	struct timeval tv = { 0, TIMEO_MS * 1000 };
	static char buf[65536];
	ssize_t r;
	long dt;

	res("setsockopt(SO_RCVTIMEO 250 ms)", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));

	/* (a) 4 pieces, each while it waits */
	tell();
	r = waitall(fd, buf, 4 * PIECE, &dt);
	res("(a) recv(WAITALL, 4000), 4 pieces, each while it waits", r);
	finish(fd, buf, r, 1, "(a)");

	/* (b) 2 pieces, then a pause */
	tell();
	r = waitall(fd, buf, 4 * PIECE, &dt);
	res("(b) recv(WAITALL, 4000), 2 pieces then a pause", r);
	say("(b) returned after %d..900 ms: %s", TIMEO_MS - 50, yesno(dt >= TIMEO_MS - 50 && dt < 900));
	finish(fd, buf, r, 2, "(b)");

	/* (c) 6 pieces, 100 ms apart */
	tell();
	r = waitall(fd, buf, 6 * PIECE, &dt);
	if (r < 0)
		res("(c) recv(WAITALL, 6000)", r);
	say("(c) recv(WAITALL, 6000), 6 pieces 100 ms apart: partial (> 0 and < 6000): %s",
	    yesno(r > 0 && r < 6 * PIECE));
	say("(c) returned after %d..900 ms: %s", TIMEO_MS - 50, yesno(dt >= TIMEO_MS - 50 && dt < 900));
	finish(fd, buf, r, 3, "(c)");

	/* (d) nothing */
	tell();
	r = waitall(fd, buf, 4 * PIECE, &dt);
	res("(d) recv(WAITALL, 4000), nothing sent", r);
	say("(d) returned after %d..900 ms: %s", TIMEO_MS - 50, yesno(dt >= TIMEO_MS - 50 && dt < 900));
	finish(fd, buf, r, 4, "(d)");

	/* (e) 2 pieces, then SHUT_WR */
	tell();
	r = waitall(fd, buf, 4 * PIECE, &dt);
	res("(e) recv(WAITALL, 4000), 2 pieces then shutdown", r);
	say("(e) returned before the timeout: %s", yesno(dt < TIMEO_MS - 50));
	finish(fd, buf, r, 5, "(e)");
	r = waitall(fd, buf, 4 * PIECE, &dt);
	res("(e) recv(WAITALL, 4000) at EOF", r);
	say("(e) returned before the timeout: %s", yesno(dt < TIMEO_MS - 50));
	tell();
	close(fd);
}

/* the client: send npieces pieces of the pattern, the first once the
 * server sleeps in its receive, each next one gap_ms later (0: once the
 * server sleeps again, having taken the last); then, unless told the
 * server's receive has returned within a second, the rest of n so that it
 * does; returns what was sent */
static size_t pieces(int fd, int npieces, int gap_ms, size_t n, unsigned seed, bool shut)
{
	char buf[8192];
	size_t off = 0;

	await_peer();                           /* the server is about to receive */
	for (int i = 0; i < npieces; i++) {
		if (i == 0 || gap_ms == 0)
			await_peer_asleep();
		else
			msleep(gap_ms);
		pattern(buf, PIECE, off, seed);
		if (send_all(fd, buf, PIECE) != PIECE)
			fatal("send");
		off += PIECE;
	}
	if (shut)
		shutdown(fd, SHUT_WR);
	struct pollfd p = { .fd = t_p2c[0], .events = POLLIN };
	if (poll(&p, 1, 1000) == 0 && !shut && off < n) {
		pattern(buf, n - off, off, seed);
		if (send_all(fd, buf, n - off) != (ssize_t)(n - off))
			fatal("send");
		off = n;
	}
	await_peer();                           /* the server's receive returned */
	tell_u64(off);
	return off;
}

static void client(void)
{
	int fd = client_conn();

	pieces(fd, 4, 0, 4 * PIECE, 1, false);
	pieces(fd, 2, 0, 4 * PIECE, 2, false);
	pieces(fd, 6, 100, 6 * PIECE, 3, false);
	pieces(fd, 0, 0, 4 * PIECE, 4, false);
	pieces(fd, 2, 0, 4 * PIECE, 5, true);
	say("done");
	await_peer();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
