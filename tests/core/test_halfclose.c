/* SPDX-License-Identifier: MIT */
/*
 * Half-close: after one side's shutdown(SHUT_WR) the other reads everything,
 * then end of stream (repeatedly), and can still send back.  Both directions.
 * sc_send after our own SHUT_WR is -EPIPE.  After SHUT_RD our own recv
 * returns 0.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define N_FIRST   300000u   /* bytes sent before the half-close */
#define N_REPLY   200000u   /* bytes sent back after it */

struct hc_arg {
	int closer_is_client;   /* which side shuts down first */
	uint64_t seed1, seed2;
};

static void send_pattern(struct sc_conn *c, uint64_t seed, size_t total)
{
	char *buf = malloc(total);

	T_ASSERT(buf != NULL);
	t_pat_fill(seed, 0, buf, total);
	/* a few pieces */
	for (size_t off = 0; off < total;) {
		size_t n = total - off < 70000 ? total - off : 70000;

		t_send_all(c, buf + off, n);
		off += n;
	}
	free(buf);
}

static void recv_pattern_to_eof(struct sc_conn *c, uint64_t seed, size_t total)
{
	char buf[40000];
	uint64_t off = 0;

	for (;;) {
		ssize_t r = sc_recv(c, buf, sizeof buf, 0);

		if (r == 0)
			break;
		if (r < 0)
			T_FAIL("sc_recv at offset %llu returned %zd%s",
			       (unsigned long long)off, r, t_errname_(r));
		T_ASSERTF(off + (uint64_t)r <= total, "got %llu bytes, only %zu sent",
			  (unsigned long long)(off + (uint64_t)r), total);
		T_PAT_CHECK(seed, off, buf, (size_t)r);
		off += (uint64_t)r;
	}
	T_EQ(off, total);
	/* end of stream is sticky, blocking and nonblocking, any flags */
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, SC_NONBLOCK), 0);
	T_EQ(sc_recv(c, buf, 1, SC_WAITALL), 0);
	T_EQ(sc_recv(c, buf, 1, SC_PEEK), 0);
}

/* The side that shuts down its sending direction first. */
static void closer(struct sc_conn *c, const struct hc_arg *a)
{
	char b = 'x';
	int ev;

	send_pattern(c, a->seed1, N_FIRST);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	T_EQ(sc_send(c, &b, 1, 0), -EPIPE);
	T_EQ(sc_send(c, &b, 1, SC_NONBLOCK), -EPIPE);
	{
		struct iovec iov = { &b, 1 };

		T_EQ(sc_sendv(c, &iov, 1, 0), -EPIPE);
	}
	/* the other direction still works */
	recv_pattern_to_eof(c, a->seed2, N_REPLY);
	ev = sc_conn_events(c);
	T_ASSERTF((ev & (SC_EV_IN | SC_EV_RDHUP | SC_EV_HUP)) ==
		  (SC_EV_IN | SC_EV_RDHUP | SC_EV_HUP) && !(ev & SC_EV_ERR),
		  "events 0x%x after both directions finished", ev);
	T_EQ(sc_send(c, &b, 1, 0), -EPIPE);
	T_EQ(sc_close(c), 0);
}

/* The side that keeps sending after the peer's half-close. */
static void survivor(struct sc_conn *c, const struct hc_arg *a)
{
	char buf[16];
	int ev;

	recv_pattern_to_eof(c, a->seed1, N_FIRST);
	ev = sc_conn_events(c);
	T_ASSERTF((ev & (SC_EV_IN | SC_EV_RDHUP)) == (SC_EV_IN | SC_EV_RDHUP),
		  "events 0x%x after the peer's SHUT_WR", ev);
	T_ASSERTF(!(ev & (SC_EV_HUP | SC_EV_ERR)), "events 0x%x: only half closed", ev);
	T_ASSERTF(ev & SC_EV_OUT, "events 0x%x: we can still send", ev);
	send_pattern(c, a->seed2, N_REPLY);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	/* the peer closes after reading everything: still end of stream */
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_close(c), 0);
}

static int hc_server(const char *path, void *arg)
{
	struct hc_arg *a = arg;
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);

	if (a->closer_is_client)
		survivor(c, a);
	else
		closer(c, a);
	sc_listener_close(l);
	return 0;
}

static int hc_client(const char *path, void *arg)
{
	struct hc_arg *a = arg;
	struct sc_conn *c = t_connect_retry(path, 0, 5000);

	if (a->closer_is_client)
		closer(c, a);
	else
		survivor(c, a);
	return 0;
}

/* ---- SHUT_RD: our own recv returns 0 at once ---------------------------- */

static int rd_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char buf[64];

	/* the client sends 5 bytes and waits for our reply */
	t_recv_all(c, buf, 5);
	T_ASSERT(memcmp(buf, "hello", 5) == 0);
	T_EQ(sc_shutdown(c, SHUT_RD), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, SC_NONBLOCK), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);        /* must not block */
	T_ASSERT(sc_conn_events(c) & SC_EV_IN);
	/* sending still works */
	t_send_all(c, "world", 5);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_close(c), 0);
	sc_listener_close(l);
	return 0;
}

static int rd_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	char buf[64];

	t_send_all(c, "hello", 5);
	t_recv_all(c, buf, 5);
	T_ASSERT(memcmp(buf, "world", 5) == 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_close(c), 0);
	return 0;
}

/* A client SHUT_RD of its own with nothing pending, before any data. */
static int rd2_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char buf[8];

	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);   /* client's SHUT_WR */
	T_EQ(sc_close(c), 0);
	sc_listener_close(l);
	return 0;
}

static int rd2_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	char buf[8];

	T_EQ(sc_shutdown(c, SHUT_RD), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_shutdown(c, SHUT_WR), 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_send(c, buf, 1, 0), -EPIPE);
	T_EQ(sc_close(c), 0);
	return 0;
}

/* SHUT_RDWR: both at once. */
static int rdwr_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char buf[8];

	t_recv_all(c, buf, 3);
	T_ASSERT(memcmp(buf, "abc", 3) == 0);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_close(c), 0);
	sc_listener_close(l);
	return 0;
}

static int rdwr_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	char buf[8];

	t_send_all(c, "abc", 3);
	T_EQ(sc_shutdown(c, SHUT_RDWR), 0);
	T_EQ(sc_send(c, "d", 1, 0), -EPIPE);
	T_EQ(sc_recv(c, buf, sizeof buf, 0), 0);
	T_EQ(sc_close(c), 0);
	return 0;
}

static void halfclose(int closer_is_client)
{
	char path[T_PATH_MAX];
	uint64_t seed = t_seed();
	struct hc_arg a;

	a.seed1 = t_mix64(seed + 1);
	a.seed2 = t_mix64(seed + 2);
	a.closer_is_client = closer_is_client;
	t_run_pair(t_listen_path(path), hc_server, hc_client, &a);
}

T_TEST(client_shut_wr)
{
	t_log("halfclose: client SHUT_WR -> server reads all then EOF, replies; "
	      "client send after SHUT_WR = -EPIPE");
	halfclose(1);
}

T_TEST(server_shut_wr)
{
	t_log("halfclose: server SHUT_WR -> client reads all then EOF, replies; "
	      "server send after SHUT_WR = -EPIPE");
	halfclose(0);
}

T_TEST(shut_rd)
{
	char path[T_PATH_MAX];

	t_log("halfclose: SHUT_RD on the server -> its recv returns 0 at once, "
	      "it can still send");
	t_run_pair(t_listen_path(path), rd_server, rd_client, NULL);
}

T_TEST(shut_rd_fresh)
{
	char path[T_PATH_MAX];

	t_log("halfclose: SHUT_RD on a fresh client connection -> recv 0");
	t_run_pair(t_listen_path(path), rd2_server, rd2_client, NULL);
}

T_TEST(shut_rdwr)
{
	char path[T_PATH_MAX];

	t_log("halfclose: SHUT_RDWR -> peer gets data then EOF, own send -EPIPE, "
	      "own recv 0");
	t_run_pair(t_listen_path(path), rdwr_server, rdwr_client, NULL);
}

T_MAIN(NULL,
       T_ENTRY(client_shut_wr),
       T_ENTRY(server_shut_wr),
       T_ENTRY(shut_rd),
       T_ENTRY(shut_rd_fresh),
       T_ENTRY(shut_rdwr))
