/* SPDX-License-Identifier: MIT */
/*
 * Send window from sc_set_bufs (rings of 64 KiB via SHORTCUT_RMEM /
 * SHORTCUT_WMEM).  The bytes in flight from the client to the server are
 * bounded by client sndbuf + server rcvbuf when both are set (at least
 * SC_WIN_MIN = 4096, at most the ring), else by the ring:
 *  1. neither set: a nonblocking client fills the whole ring, then -EAGAIN;
 *  2. only the client's sndbuf set: still the whole ring;
 *  3. sndbuf 8192 + rcvbuf 4096: exactly 12288, then -EAGAIN; SC_EV_OUT
 *     comes back only once free space > window/3 (4096), checked at the
 *     exact byte; the rest of the window is then sendable;
 *  4. sndbuf 100 + rcvbuf 100: the 4096-byte floor;
 *  5. a blocking send of 30000 stuck at the 12288 window goes on, without
 *     the server reading, once the server widens its rcvbuf;
 *  6. the server unsets its rcvbuf (0): the client's poll wakes and the
 *     window is the whole ring again.
 * Each case has its own connection; steps are sequenced through two pipes.
 * Where a case needs the client asleep (5: blocked in its send at the
 * window, 6: in poll), the server waits for the state of the client's
 * thread (the client sends its pid first), not for a fixed time.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define RING 65536u
#define SEED_BASE 0x3d1e0000u
#define WIN3 (8192u + 4096u)
#define SEND5 30000u
#define WIDEN_LIMIT_MS 2000

static int to_client[2], to_server[2];   /* pipes */
static pid_t client_pid;                 /* in the server */

static void put(int fd, uint64_t v) { t_write_full(fd, &v, sizeof v); }
static uint64_t get(int fd) { uint64_t v; t_read_full(fd, &v, sizeof v); return v; }

/*
 * Client: nonblocking sends of random sizes (pattern from stream offset
 * *off) until -EAGAIN; fails if more than limit bytes in total go in.
 * Returns the bytes sent by this call.
 */
static uint64_t fill_nb(struct sc_conn *c, uint64_t seed, uint64_t *off, uint64_t limit,
			char *buf, const char *what)
{
	struct t_rng rng;
	uint64_t sent = 0;

	t_rng_seed(&rng, seed ^ *off);
	for (;;) {
		size_t n = (size_t)t_rng_range(&rng, 1, 9000);
		ssize_t r;

		t_pat_fill(seed, *off, buf, n);
		r = sc_send(c, buf, n, SC_NONBLOCK);
		if (r == -EAGAIN)
			break;
		T_ASSERTF(r > 0 && (size_t)r <= n, "%s: nonblocking send(%zu) at offset %llu "
			  "returned %zd%s", what, n, (unsigned long long)*off, r, t_errname_(r));
		*off += (uint64_t)r;
		sent += (uint64_t)r;
		T_ASSERTF(*off <= limit, "%s: %llu bytes in flight, more than the %llu "
			  "expected, while nobody reads", what, (unsigned long long)*off,
			  (unsigned long long)limit);
	}
	/* still full */
	T_EQ(sc_send(c, buf, 1, SC_NONBLOCK), -EAGAIN);
	return sent;
}

/* Server: receive exactly n bytes (blocking) and check them. */
static void drain(struct sc_conn *c, uint64_t seed, uint64_t off, uint64_t n, char *buf)
{
	while (n) {
		size_t k = n < 7000 ? (size_t)n : 7000;

		t_recv_all(c, buf, k);
		T_PAT_CHECK(seed, off, buf, k);
		off += k;
		n -= k;
	}
}

/* Server: nonblocking peek of up to want bytes; the bytes available. */
static ssize_t peek_avail(struct sc_conn *c, char *buf, size_t want)
{
	ssize_t r = sc_recv(c, buf, want, SC_NONBLOCK | SC_PEEK);

	if (r == -EAGAIN)
		return 0;
	T_ASSERTF(r > 0, "peek returned %zd%s", r, t_errname_(r));
	return r;
}

/* Both: end of a case.  The client closes after the server has it all. */
static void server_end(struct sc_conn *c, char *buf)
{
	put(to_client[1], 99);
	T_EQ(sc_recv(c, buf, 10, 0), 0);
	T_EQ(sc_close(c), 0);
}

static void client_end(struct sc_conn *c)
{
	T_EQ(get(to_client[0]), 99);
	T_EQ(sc_close(c), 0);
}

/* ---- cases 1, 2, 4: fill with the given buffers ------------------------ */

struct simple { int k, csnd, srcv; uint64_t expect; const char *what; };

static const struct simple simples[] = {
	{ 1, -1, -1, RING, "neither buffer set" },
	{ 2, 8192, -1, RING, "only the client's sndbuf (8192) set" },
	{ 4, 100, 100, 4096, "sndbuf 100 + rcvbuf 100 (the SC_WIN_MIN floor)" },
};

static void server_simple(struct sc_listener *l, const struct simple *s, char *buf)
{
	struct sc_conn *c = NULL;
	uint64_t seed = SEED_BASE + (uint64_t)s->k, fill;

	T_OK(sc_accept(l, &c, 0));
	if (s->srcv >= 0)
		sc_set_bufs(c, -1, s->srcv);
	put(to_client[1], (uint64_t)s->k);      /* "go" */
	fill = get(to_server[0]);
	T_EQ(fill, s->expect);
	T_ASSERT(sc_conn_events(c) & SC_EV_IN);
	T_EQ(peek_avail(c, buf, RING), (ssize_t)s->expect);
	drain(c, seed, 0, fill, buf);
	T_EQ(sc_recv(c, buf, 1, SC_NONBLOCK), -EAGAIN);
	server_end(c, buf);
}

static void client_simple(const char *path, const struct simple *s, char *buf)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	uint64_t seed = SEED_BASE + (uint64_t)s->k, off = 0;
	int ev;

	t_log("window %d: %s: a nonblocking client fills exactly %llu, then -EAGAIN",
	      s->k, s->what, (unsigned long long)s->expect);
	if (s->csnd >= 0)
		sc_set_bufs(c, s->csnd, -1);
	T_EQ(get(to_client[0]), (uint64_t)s->k);
	ev = sc_conn_events(c);
	T_ASSERTF(ev & SC_EV_OUT, "events 0x%x on an empty ring", ev);
	fill_nb(c, seed, &off, s->expect, buf, s->what);
	T_EQ(off, s->expect);
	ev = sc_conn_events(c);
	T_ASSERTF(!(ev & SC_EV_OUT), "events 0x%x with a full window", ev);
	put(to_server[1], off);
	client_end(c);
}

/* ---- case 3: 12288 window and the SC_EV_OUT threshold ------------------- */

static void server_3(struct sc_listener *l, char *buf)
{
	struct sc_conn *c = NULL;
	uint64_t seed = SEED_BASE + 3, fill, more;

	T_OK(sc_accept(l, &c, 0));
	sc_set_bufs(c, -1, 4096);
	put(to_client[1], 3);
	fill = get(to_server[0]);
	T_EQ(fill, WIN3);
	T_EQ(peek_avail(c, buf, RING), WIN3);
	/* free space 4096 == window/3: not yet writable */
	drain(c, seed, 0, 4096, buf);
	put(to_client[1], 31);
	T_EQ(get(to_server[0]), 32);
	/* one more byte: free space 4097 > window/3 */
	drain(c, seed, 4096, 1, buf);
	put(to_client[1], 33);
	more = get(to_server[0]);
	T_EQ(more, 4097);
	drain(c, seed, 4097, WIN3, buf);
	T_EQ(sc_recv(c, buf, 1, SC_NONBLOCK), -EAGAIN);
	server_end(c, buf);
}

static void client_3(const char *path, char *buf)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_conn_info info;
	uint64_t seed = SEED_BASE + 3, off = 0, waited;
	int ev;

	t_log("window 3: sndbuf 8192 + peer rcvbuf 4096: fills exactly %u, then "
	      "-EAGAIN; SC_EV_OUT again once free space > %u", WIN3, WIN3 / 3);
	sc_set_bufs(c, 8192, -1);
	T_EQ(get(to_client[0]), 3);
	fill_nb(c, seed, &off, WIN3, buf, "window 3");
	T_EQ(off, WIN3);
	ev = sc_conn_events(c);
	T_ASSERTF(!(ev & SC_EV_OUT), "events 0x%x with a full 12288-byte window", ev);
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.tx_ring_size, RING);
	T_EQ(info.tx_prod, WIN3);
	put(to_server[1], off);

	/* the server read 4096: free space == window/3, not > */
	T_EQ(get(to_client[0]), 31);
	ev = sc_conn_events(c);
	T_ASSERTF(!(ev & SC_EV_OUT), "events 0x%x with free space %u == window/3 "
		  "(SC_EV_OUT needs free space > window/3)", ev, WIN3 / 3);
	put(to_server[1], 32);

	/* one byte more read: writable */
	T_EQ(get(to_client[0]), 33);
	waited = t_wait_events(c, SC_EV_OUT, 2000, "window 3: free space 4097 > window/3");
	t_log("window 3:   SC_EV_OUT after %llu ms", (unsigned long long)waited);
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.tx_prod - info.tx_cons, WIN3 - 4097);    /* in flight */
	/* the rest of the window, and not a byte more */
	fill_nb(c, seed, &off, WIN3 + 4097, buf, "window 3 (refill)");
	T_EQ(off, WIN3 + 4097);
	T_ASSERT(!(sc_conn_events(c) & SC_EV_OUT));
	put(to_server[1], 4097);
	client_end(c);
}

/* ---- case 5: widening the window under a blocked sender ------------------ */

static void server_5(struct sc_listener *l, char *buf)
{
	struct sc_conn *c = NULL;
	uint64_t seed = SEED_BASE + 5, t0, waited;
	ssize_t av;

	T_OK(sc_accept(l, &c, 0));
	sc_set_bufs(c, -1, 4096);
	put(to_client[1], 5);
	T_EQ(get(to_server[0]), 51);    /* the client is sending */
	t0 = t_now_ms();
	while ((av = peek_avail(c, buf, SEND5)) < (ssize_t)WIN3) {
		T_ASSERTF(t_now_ms() - t0 < 5000, "only %zd bytes arrived in 5 s", av);
		t_sleep_ms(1);
	}
	T_EQ(av, WIN3);
	/* the sender blocked at the window: asleep in its send */
	t_wait_asleep(client_pid, client_pid, 10000, "window 5: the sender");
	T_EQ(peek_avail(c, buf, SEND5), WIN3);
	/* widen: the blocked sender goes on without us reading */
	sc_set_bufs(c, -1, 65536);
	t0 = t_now_ms();
	while ((av = peek_avail(c, buf, SEND5)) < (ssize_t)SEND5) {
		T_ASSERTF(t_now_ms() - t0 <= WIDEN_LIMIT_MS, "%zd of %u bytes available "
			  "%d ms after the receiver widened its rcvbuf to 65536 without "
			  "reading (the blocked sender did not go on)", av, SEND5,
			  WIDEN_LIMIT_MS);
		t_sleep_ms(1);
	}
	waited = t_now_ms() - t0;
	t_log("window 5:   all %u bytes there %llu ms after widening", SEND5,
	      (unsigned long long)waited);
	T_EQ(av, SEND5);
	T_PAT_CHECK(seed, 0, buf, SEND5);
	T_ASSERT(sc_conn_events(c) & SC_EV_IN);
	drain(c, seed, 0, SEND5, buf);
	T_EQ(get(to_server[0]), SEND5);
	T_EQ(sc_recv(c, buf, 1, SC_NONBLOCK), -EAGAIN);
	server_end(c, buf);
}

static void client_5(const char *path, char *buf)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_conn_info info;
	uint64_t seed = SEED_BASE + 5;
	ssize_t r;

	t_log("window 5: a blocking send of %u stuck at the %u window goes on "
	      "when the receiver widens its rcvbuf, without it reading", SEND5, WIN3);
	sc_set_bufs(c, 8192, -1);
	T_EQ(get(to_client[0]), 5);
	t_pat_fill(seed, 0, buf, SEND5);
	put(to_server[1], 51);
	r = sc_send(c, buf, SEND5, 0);
	T_EQ(r, SEND5);
	T_EQ(sc_conn_info(c, &info), 0);
	T_ASSERTF(info.sleeps >= 1, "sleeps %llu: the send never blocked at the window",
		  (unsigned long long)info.sleeps);
	put(to_server[1], SEND5);
	client_end(c);
}

/* ---- case 6: unsetting rcvbuf restores the whole ring -------------------- */

static void server_6(struct sc_listener *l, char *buf)
{
	struct sc_conn *c = NULL;
	uint64_t seed = SEED_BASE + 6;

	T_OK(sc_accept(l, &c, 0));
	sc_set_bufs(c, -1, 4096);
	put(to_client[1], 6);
	T_EQ(get(to_server[0]), WIN3);
	/* the client sits in poll() */
	t_wait_asleep(client_pid, client_pid, 10000, "window 6: the client");
	sc_set_bufs(c, -1, 0);
	T_EQ(get(to_server[0]), RING);
	T_EQ(peek_avail(c, buf, RING), RING);
	drain(c, seed, 0, RING, buf);
	T_EQ(sc_recv(c, buf, 1, SC_NONBLOCK), -EAGAIN);
	server_end(c, buf);
}

static void client_6(const char *path, char *buf)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	uint64_t seed = SEED_BASE + 6, off = 0, waited;

	t_log("window 6: the receiver unsets its rcvbuf (0): the sender's poll wakes "
	      "and the window is the whole ring again");
	sc_set_bufs(c, 8192, -1);
	T_EQ(get(to_client[0]), 6);
	fill_nb(c, seed, &off, WIN3, buf, "window 6");
	T_EQ(off, WIN3);
	T_ASSERT(!(sc_conn_events(c) & SC_EV_OUT));
	put(to_server[1], off);
	waited = t_wait_events(c, SC_EV_OUT, 10000, "window 6: rcvbuf unset");
	t_log("window 6:   SC_EV_OUT after %llu ms (the peer waits until we sleep)",
	      (unsigned long long)waited);
	fill_nb(c, seed, &off, RING, buf, "window 6 (whole ring)");
	T_EQ(off, RING);
	T_ASSERT(!(sc_conn_events(c) & SC_EV_OUT));
	put(to_server[1], off);
	client_end(c);
}

/* ---- the two processes ---------------------------------------------------- */

static int server(const char *path, void *arg)
{
	struct sc_listener *l = NULL;
	char *buf = malloc(RING * 2);

	T_ASSERT(buf != NULL);
	close(to_client[0]);
	close(to_server[1]);
	client_pid = (pid_t)get(to_server[0]);
	T_OK(sc_listen(path, 0, &l));
	server_simple(l, &simples[0], buf);
	server_simple(l, &simples[1], buf);
	server_3(l, buf);
	server_simple(l, &simples[2], buf);
	server_5(l, buf);
	server_6(l, buf);
	sc_listener_close(l);
	free(buf);
	return 0;
}

static int client(const char *path, void *arg)
{
	char *buf = malloc(RING * 2);

	T_ASSERT(buf != NULL);
	close(to_client[1]);
	close(to_server[0]);
	put(to_server[1], (uint64_t)getpid());
	client_simple(path, &simples[0], buf);
	client_simple(path, &simples[1], buf);
	client_3(path, buf);
	client_simple(path, &simples[2], buf);
	client_5(path, buf);
	client_6(path, buf);
	free(buf);
	return 0;
}

/* 1-6 above, one pair of processes */
T_TEST(sndbuf_rcvbuf)
{
	t_run_pair_64k(to_client, to_server, server, client);
}

T_MAIN(NULL, T_ENTRY(sndbuf_rcvbuf))
