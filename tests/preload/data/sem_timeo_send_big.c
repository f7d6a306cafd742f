/* SPDX-License-Identifier: MIT */
/* SO_SNDTIMEO and one blocking send() far larger than all buffering: the
 * timeout bounds the send's total waiting (progress does not restart it).
 * (a) a reader that keeps up gets the whole send in one call; (b) a reader
 * draining slowly but steadily makes the send return a partial count after
 * about the timeout; (c) a reader that stops makes a send return a partial
 * count after the timeout, and sending on ends in a send that fails with
 * EAGAIN after another timeout.  What arrives is intact every time.
 * All buffering is fixed (SO_SNDBUF 256 KiB on the client's sockets,
 * SO_RCVBUF 256 KiB on the listener before the client connects), so 16 MiB
 * is far more than it by construction, whatever the kernel's autotuning
 * would grow them to (tcp_rmem's maximum can be 32 MiB).  In (a) "keeps up"
 * is relative to the timeout, so there it is 10 s (a busy machine may keep
 * the reader off the CPU for longer than 300 ms in all); (b) and (c) have
 * 300 ms. */
#include "common.h"

#define BIG (16u << 20)         /* more than any ring or socket buffer */
#define TIMEO_MS 300
#define BUFSZ (256 << 10)       /* SO_SNDBUF / SO_RCVBUF */

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

enum { KEEP_UP, PACED, STOPPED };

/* The server: read all that comes (KEEP_UP), 64 KiB every 10 ms (PACED) or
 * nothing (STOPPED) until the client reports on the sync pipe how much it
 * sent; then read the rest of that and check it all against the pattern. */
static void drain(int fd, int how, const char *what)
{
	static char buf[65536];
	uint64_t h = CK_INIT;
	size_t have = 0, n;

	for (;;) {
		struct pollfd p[2] = { { .fd = t_c2p[0], .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };
		if (how == STOPPED)
			break;                  /* await_u64 waits */
		if (how == PACED) {
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r > 0) {
				h = ck(h, buf, (size_t)r);
				have += (size_t)r;
			}
			if (poll(p, 1, 10) > 0)
				break;
			continue;
		}
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			fatal("poll");
		if (p[0].revents)
			break;
		if (p[1].revents) {
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r > 0) {
				h = ck(h, buf, (size_t)r);
				have += (size_t)r;
			}
		}
	}
	n = (size_t)await_u64();
	while (have < n) {
		size_t k = n - have < sizeof(buf) ? n - have : sizeof(buf);
		ssize_t r = recv_all(fd, buf, k);
		if (r <= 0)
			break;
		h = ck(h, buf, (size_t)r);
		have += (size_t)r;
	}
	say("%s: received all that was sent: %s, intact: %s", what, yesno(have == n),
	    yesno(h == pattern_ck(n, 7)));
	res("then nothing more (DONTWAIT)", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
}

static void server(int lfd)
{
	set_rcvbuf(lfd, BUFSZ);
	tell();                                 /* client: connect now */
	int fd = server_conn(lfd);

	tell();
	drain(fd, KEEP_UP, "(a) reader keeping up");
	tell();
	drain(fd, PACED, "(b) slow reader");
	tell();
	close(fd);
	fd = server_conn(lfd);
	drain(fd, STOPPED, "(c) stopped reader, then drained");
	tell();
	close(fd);
}

/* a connection with SO_SNDBUF set before it connects */
static int small_conn(void)
{
	int fd = sndbuf_socket(BUFSZ);
	connect_hs(fd);
	return fd;
}

static void client(void)
{
	await_peer();                           /* the listener's SO_RCVBUF is set */
	int fd = small_conn();
	char *big = malloc(BIG);
	struct timeval tv = { 0, TIMEO_MS * 1000 }, tv_a = { 10, 0 };
	long t0, dt;
	ssize_t n;

	if (!big)
		fatal("malloc");
	pattern(big, BIG, 0, 7);
	res("setsockopt(SO_SNDTIMEO 10 s)", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv_a, sizeof(tv_a)));

	/* (a) */
	await_peer();
	n = send(fd, big, BIG, MSG_NOSIGNAL);
	say("(a) send of 16 MiB to a reader keeping up returns all of it: %s", yesno(n == BIG));
	if (n < 0)
		res("(a) send", n);
	tell_u64(n > 0 ? (uint64_t)n : 0);
	await_peer();

	/* (b) */
	res("setsockopt(SO_SNDTIMEO 300 ms)", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	t0 = now_ms();
	n = send(fd, big, BIG, MSG_NOSIGNAL);
	dt = now_ms() - t0;
	if (n < 0)
		res("(b) send", n);
	say("(b) send to a slow reader returns partial (> 0 and < 16 MiB): %s", yesno(n > 0 && n < BIG));
	say("(b) returned after %d..5000 ms: %s", TIMEO_MS - 50, yesno(dt >= TIMEO_MS - 50 && dt < 5000));
	tell_u64(n > 0 ? (uint64_t)n : 0);
	await_peer();
	close(fd);

	/* (c) a new connection; its reader reads nothing until the end */
	fd = small_conn();
	res("setsockopt(SO_SNDTIMEO 300 ms)", setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	t0 = now_ms();
	n = send(fd, big, BIG, MSG_NOSIGNAL);
	dt = now_ms() - t0;
	if (n < 0)
		res("(c) send", n);
	say("(c) send to a stopped reader returns partial (> 0 and < 16 MiB): %s", yesno(n > 0 && n < BIG));
	say("(c) returned after %d..5000 ms: %s", TIMEO_MS - 50, yesno(dt >= TIMEO_MS - 50 && dt < 5000));
	/* send on until a send fails (the kernel may take a few more bytes
	 * first, from buffer space freed below its wake-up threshold) */
	size_t total = n > 0 ? (size_t)n : 0;
	int tries = 0;
	bool slow = true;
	ssize_t m;
	do {
		t0 = now_ms();
		m = send(fd, big + total, BIG - total, MSG_NOSIGNAL);
		dt = now_ms() - t0;
		slow = slow && dt >= TIMEO_MS - 50 && dt < 5000;
		if (m > 0)
			total += (size_t)m;
	} while (m > 0 && ++tries < 8);
	say("(c) sending on ends in a failed send: %s", yesno(m < 0));
	if (m < 0)
		res("(c) that send", m);
	say("(c) every further send took %d..5000 ms: %s", TIMEO_MS - 50, yesno(slow));
	tell_u64(total);
	await_peer();
	free(big);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
