/* SPDX-License-Identifier: MIT */
/*
 * Sends from a reader and receives into a writer (sc__send_from,
 * sc__recv_to: what the interposer's splice uses), rings of 64 KiB.  A
 * reader is offered no more than the ring's room, so it never takes bytes
 * the ring cannot hold (a pipe's bytes stay in the pipe); only what a
 * writer took leaves the ring.
 *  1. the ring full: a nonblocking send from a reader is -EAGAIN and the
 *     reader is not called;
 *  2. the server reads 5000: a send of 100000 from a reader is exactly
 *     5000, the reader offered at most the room at each call, and it gave
 *     exactly 5000;
 *  3. a reader that has 3 bytes: a blocking send of 10 is 3; one that has
 *     none: 0; one that fails: its error;
 *  4. a writer that takes at most 100 a call: a receive of 1000 is 100 and
 *     the next byte received is the 101st; one with no room: -EAGAIN,
 *     nothing taken; one that fails: its error;
 * every byte checked in stream order.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "txrx.h"
#include "t_util.h"

#define RING 65536u
#define SEED 0x5911ce
#define PART 5000u

static int to_client[2], to_server[2];   /* pipes */

static void put(int fd, uint64_t v) { t_write_full(fd, &v, sizeof v); }
static uint64_t get(int fd) { uint64_t v; t_read_full(fd, &v, sizeof v); return v; }

/* A reader over the pattern stream: gives up to have bytes from *off,
 * then 0 (err: fails with it instead). */
struct feed {
	uint64_t off;
	size_t have, gave;
	size_t most;            /* the most it was offered in one call */
	int calls, err;
};

static ssize_t feed_read(void *arg, const struct iovec *v, int n)
{
	struct feed *f = arg;
	size_t offered = 0, done = 0;
	f->calls++;
	for (int i = 0; i < n; i++)
		offered += v[i].iov_len;
	if (offered > f->most)
		f->most = offered;
	if (f->err)
		return f->err;
	for (int i = 0; i < n && f->have; i++) {
		size_t k = v[i].iov_len < f->have ? v[i].iov_len : f->have;
		t_pat_fill(SEED, f->off, v[i].iov_base, k);
		f->off += k;
		f->have -= k;
		f->gave += k;
		done += k;
	}
	return (ssize_t)done;
}

/* A writer that checks what it takes against the stream, at most each a
 * call (err: fails with it instead). */
struct sink {
	uint64_t off;
	size_t each;
	int err;
};

static ssize_t sink_write(void *arg, const struct iovec *v, int n)
{
	struct sink *s = arg;
	size_t done = 0;
	if (s->err)
		return s->err;
	for (int i = 0; i < n && done < s->each; i++) {
		size_t k = v[i].iov_len < s->each - done ? v[i].iov_len : s->each - done;
		T_PAT_CHECK(SEED, s->off, v[i].iov_base, k);
		s->off += k;
		done += k;
	}
	return (ssize_t)done;
}

static int server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	static char buf[RING];
	uint64_t off = 0;

	uint64_t full = get(to_server[0]);      /* 1: the client filled the ring */
	t_recv_all(c, buf, PART);
	T_PAT_CHECK(SEED, off, buf, PART);
	off += PART;
	put(to_client[1], 2);
	/* 2: all of it; 3: then 3 more */
	uint64_t end = get(to_server[0]);
	T_EQ(end, full + PART);
	for (int step = 3; step <= 4; step++) {
		while (off < end) {
			size_t k = end - off < sizeof(buf) ? (size_t)(end - off) : sizeof(buf);
			t_recv_all(c, buf, k);
			T_PAT_CHECK(SEED, off, buf, k);
			off += k;
		}
		put(to_client[1], (uint64_t)step);
		if (step == 3)
			T_EQ(end = get(to_server[0]), full + PART + 3);
	}
	/* 4: the client sent 1000 more */
	T_EQ(get(to_server[0]), end + 1000);
	T_EQ(sc_recv(c, buf, 1000, SC_PEEK | SC_WAITALL), 1000);
	struct sink s = { .off = off, .each = 100 };
	struct sc_dst dst = { .wr = sink_write, .arg = &s };
	T_EQ(sc__recv_to(c, &dst, 1000, 0), 100);
	T_EQ(s.off, off + 100);
	off += 100;
	s.err = -EAGAIN;
	T_EQ(sc__recv_to(c, &dst, 1000, 0), -EAGAIN);
	s.err = -EPIPE;
	T_EQ(sc__recv_to(c, &dst, 1000, 0), -EPIPE);
	t_recv_all(c, buf, 900);                /* the rest, from the 101st */
	T_PAT_CHECK(SEED, off, buf, 900);
	put(to_client[1], 5);
	T_EQ(sc_recv(c, buf, 10, 0), 0);
	T_EQ(sc_close(c), 0);
	sc_listener_close(l);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 10000);
	static char buf[9000];
	uint64_t off = 0;

	/* 1 */
	for (;;) {
		t_pat_fill(SEED, off, buf, sizeof(buf));
		ssize_t r = sc_send(c, buf, sizeof(buf), SC_NONBLOCK);
		if (r == -EAGAIN)
			break;
		T_ASSERT(r > 0);
		off += (uint64_t)r;
	}
	T_EQ(off, RING);
	struct feed f = { .off = off, .have = 100000 };
	struct sc_src src = { .rd = feed_read, .arg = &f };
	T_EQ(sc__send_from(c, &src, 1000, SC_NONBLOCK), -EAGAIN);
	T_EQ(f.calls, 0);
	put(to_server[1], off);
	/* 2 */
	T_EQ(get(to_client[0]), 2);
	T_EQ(sc__send_from(c, &src, 100000, SC_NONBLOCK), PART);
	T_EQ(f.gave, PART);
	T_ASSERTF(f.most <= PART, "offered %zu with room for %u", f.most, PART);
	off += PART;
	put(to_server[1], off);
	/* 3 */
	T_EQ(get(to_client[0]), 3);
	f = (struct feed){ .off = off, .have = 3 };
	T_EQ(sc__send_from(c, &src, 10, 0), 3);
	off += 3;
	f = (struct feed){ .off = off };
	T_EQ(sc__send_from(c, &src, 10, 0), 0);
	f = (struct feed){ .off = off, .have = 10, .err = -EIO };
	T_EQ(sc__send_from(c, &src, 10, 0), -EIO);
	put(to_server[1], off);
	/* 4 */
	T_EQ(get(to_client[0]), 4);
	t_pat_fill(SEED, off, buf, 1000);
	t_send_all(c, buf, 1000);
	off += 1000;
	put(to_server[1], off);
	T_EQ(get(to_client[0]), 5);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	T_EQ(sc_close(c), 0);
	return 0;
}

/* 1-4 above, on one connection */
T_TEST(reader_writer)
{
	t_run_pair_64k(to_client, to_server, server, client);
}

T_MAIN(NULL, T_ENTRY(reader_writer))
