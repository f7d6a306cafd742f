/* SPDX-License-Identifier: MIT */
/*
 * Abortive close, as with TCP:
 *  - close with received data left unread -> the peer's recv gets
 *    -ECONNRESET (possibly after data it had already queued, never EOF), and
 *    its sends get -ECONNRESET or -EPIPE;
 *  - sc_set_linger0 + close -> -ECONNRESET even with nothing unread;
 *  - a clean close with everything read -> the peer gets all data, then 0.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define SEED_C 0x5eed0001u
#define SEED_S 0x5eed0002u

struct rst_arg {
	size_t c2s;         /* bytes the client sends (left unread by the server) */
	size_t s2c;         /* bytes the server sends before closing */
	int linger0;
};

/* Wait until at least n bytes are readable on c without consuming them. */
static void wait_readable(struct sc_conn *c, size_t n)
{
	char *buf = malloc(n);
	uint64_t end = t_now_ms() + 10000;

	T_ASSERT(buf != NULL);
	for (;;) {
		ssize_t r = sc_recv(c, buf, n, SC_PEEK | SC_NONBLOCK);

		if (r == (ssize_t)n)
			break;
		T_ASSERTF(r == -EAGAIN || (r > 0 && (size_t)r < n),
			  "peek returned %zd%s", r, t_errname_(r));
		T_ASSERTF(t_now_ms() < end, "only %zd of %zu bytes arrived", r, n);
		struct pollfd pfd = { sc_conn_fd(c), POLLIN, 0 };
		poll(&pfd, 1, 10);
	}
	free(buf);
}

static int rst_server(const char *path, void *arg)
{
	struct rst_arg *a = arg;
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	struct sc_stats st;
	char *buf;

	if (a->c2s) {
		/* make sure the client's data is here, then leave it unread */
		wait_readable(c, a->c2s);
	}
	if (a->s2c) {
		buf = malloc(a->s2c);
		T_ASSERT(buf != NULL);
		t_pat_fill(SEED_S, 0, buf, a->s2c);
		t_send_all(c, buf, a->s2c);
		free(buf);
	}
	if (a->linger0)
		sc_set_linger0(c, 1);
	T_EQ(sc_close(c), 0);
	sc_stats_get(&st);
	T_EQ(st.conns_opened, 1);
	if (a->c2s || a->linger0)
		T_EQ(st.conns_aborted, 1);
	else
		T_EQ(st.conns_aborted, 0);
	sc_listener_close(l);
	return 0;
}

/* Expect: maybe some of the server's bytes (in order), then -ECONNRESET. */
static int rst_client(const char *path, void *arg)
{
	struct rst_arg *a = arg;
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_stats st;
	char *buf = malloc(a->c2s + 1), rb[8192];
	uint64_t off = 0;
	ssize_t r;
	int ev;

	T_ASSERT(buf != NULL);
	if (a->c2s) {
		t_pat_fill(SEED_C, 0, buf, a->c2s);
		t_send_all(c, buf, a->c2s);
	}
	for (;;) {
		r = sc_recv(c, rb, sizeof rb, 0);
		if (r > 0) {
			T_PAT_CHECK(SEED_S, off, rb, (size_t)r);
			off += (uint64_t)r;
			T_ASSERT(off <= a->s2c);
			continue;
		}
		break;
	}
	if (r == 0)
		T_FAIL("recv returned end of stream after %llu bytes; expected "
		       "-ECONNRESET (server closed with unread data or linger0)",
		       (unsigned long long)off);
	T_EQ(r, -ECONNRESET);
	ev = sc_conn_events(c);
	T_ASSERTF(ev & SC_EV_IN, "events 0x%x after reset", ev);
	r = sc_send(c, buf, a->c2s ? a->c2s : 1, 0);
	T_ASSERTF(r == -ECONNRESET || r == -EPIPE, "sc_send after reset returned %zd%s",
		  r, t_errname_(r));
	r = sc_send(c, buf, 1, SC_NONBLOCK);
	T_ASSERTF(r == -ECONNRESET || r == -EPIPE, "sc_send after reset returned %zd%s",
		  r, t_errname_(r));
	/* a later recv reports the reset again or end of stream, never blocks */
	r = sc_recv(c, rb, sizeof rb, 0);
	T_ASSERTF(r == -ECONNRESET || r == 0, "second recv after reset returned %zd%s",
		  r, t_errname_(r));
	T_EQ(sc_close(c), 0);
	free(buf);
	/* "conns_aborted: reset by either side or by peer death" */
	sc_stats_get(&st);
	T_ASSERTF(st.conns_aborted == 1, "conns_aborted is %llu in the process whose "
		  "connection the peer reset, want 1",
		  (unsigned long long)st.conns_aborted);
	return 0;
}

/* Clean close: everything the client sent was read, so the client gets all
 * of the server's data and then end of stream. */
static int clean_server(const char *path, void *arg)
{
	struct rst_arg *a = arg;
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	struct sc_stats st;
	char *buf = malloc(a->c2s > a->s2c ? a->c2s : a->s2c);

	T_ASSERT(buf != NULL);
	t_recv_all(c, buf, a->c2s);
	T_PAT_CHECK(SEED_C, 0, buf, a->c2s);
	t_pat_fill(SEED_S, 0, buf, a->s2c);
	t_send_all(c, buf, a->s2c);
	T_EQ(sc_close(c), 0);
	sc_stats_get(&st);
	T_EQ(st.conns_aborted, 0);
	T_EQ(st.conns_closed, 1);
	sc_listener_close(l);
	free(buf);
	return 0;
}

static int clean_client(const char *path, void *arg)
{
	struct rst_arg *a = arg;
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_stats st;
	char *buf = malloc(a->c2s > a->s2c ? a->c2s : a->s2c);

	T_ASSERT(buf != NULL);
	t_pat_fill(SEED_C, 0, buf, a->c2s);
	t_send_all(c, buf, a->c2s);
	memset(buf, 0, a->s2c);
	t_recv_all(c, buf, a->s2c);
	T_PAT_CHECK(SEED_S, 0, buf, a->s2c);
	T_EQ(sc_recv(c, buf, 1, 0), 0);
	T_EQ(sc_recv(c, buf, 1, 0), 0);
	T_ASSERT(!(sc_conn_events(c) & SC_EV_ERR));
	T_EQ(sc_close(c), 0);
	sc_stats_get(&st);
	T_EQ(st.conns_aborted, 0);
	free(buf);
	return 0;
}

static void pair(int (*server)(const char *, void *), int (*client)(const char *, void *),
		 struct rst_arg a)
{
	char path[T_PATH_MAX];

	t_run_pair(t_listen_path(path), server, client, &a);
}

T_TEST(unread)
{
	t_log("reset: server closes with 1000 unread bytes -> client recv -ECONNRESET, "
	      "send -ECONNRESET/-EPIPE");
	pair(rst_server, rst_client, (struct rst_arg){ .c2s = 1000, .s2c = 0, .linger0 = 0 });
}

T_TEST(unread_after_data)
{
	t_log("reset: server sends 5000 bytes, then closes with unread bytes -> "
	      "client gets a prefix of them, then -ECONNRESET (never EOF)");
	pair(rst_server, rst_client, (struct rst_arg){ .c2s = 1000, .s2c = 5000, .linger0 = 0 });
}

T_TEST(one_unread_byte)
{
	t_log("reset: server closes with 1 unread byte -> client -ECONNRESET");
	pair(rst_server, rst_client, (struct rst_arg){ .c2s = 1, .s2c = 0, .linger0 = 0 });
}

T_TEST(linger0)
{
	t_log("reset: sc_set_linger0 + close with nothing unread -> client -ECONNRESET");
	pair(rst_server, rst_client, (struct rst_arg){ .c2s = 0, .s2c = 0, .linger0 = 1 });
}

T_TEST(clean_close)
{
	t_log("reset: clean close after reading everything -> client gets all "
	      "1000000 bytes (more than a ring), then 0");
	pair(clean_server, clean_client, (struct rst_arg){ .c2s = 3000, .s2c = 1000000,
							   .linger0 = 0 });
}

T_MAIN(NULL,
       T_ENTRY(unread),
       T_ENTRY(unread_after_data),
       T_ENTRY(one_unread_byte),
       T_ENTRY(linger0),
       T_ENTRY(clean_close))
