/* SPDX-License-Identifier: MIT */
/*
 * 1000 connections between one pair of processes.  The client connects 1000
 * times, the server accepts them all and serves them from ONE completion
 * channel (sc_chan_wait + nonblocking recv on the reported connections
 * only).  Each connection carries a distinct message each way.  Then the
 * client closes a random half (server must see EOF on exactly those), the
 * server closes the other half (client sees EOF), and everything is closed
 * in random order.  1000 connections need >= 4 link groups of 255.
 * The client closes its half only once the server says it has left the
 * request loop: a connection the server has answered may still be
 * reported to it in the same sc_chan_wait batch, and an EOF there (the
 * client having read every reply and closed already) is not what the
 * request loop checks.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define NCONN 1000
#define MSG 48
#define MIN_GROUPS 4

static int pipe_c2s[2], pipe_s2c[2];
static uint64_t base_seed;

static void make_msg(char *m, const char *dir, int idx)
{
	char tmp[MSG + 1];

	memset(tmp, '.', sizeof tmp);
	snprintf(tmp, sizeof tmp, "%s %04d %016llx ", dir, idx,
		 (unsigned long long)t_mix64(base_seed ^ ((uint64_t)idx << 8) ^ (uint64_t)dir[0]));
	tmp[strlen(tmp)] = '.';
	memcpy(m, tmp, MSG);
	m[MSG - 1] = '\n';
}

struct sconn {
	struct sc_conn *c;
	int idx;            /* from the message, -1 until known */
	size_t got;
	char msg[MSG];
	int replied, eof, closing;
};

/* Drain c without blocking; returns 1 if it saw end of stream. */
static int drain(struct sconn *s, int *seen)
{
	for (;;) {
		char tmp[MSG];
		size_t want = s->got < MSG ? MSG - s->got : sizeof tmp;
		ssize_t r = sc_recv(s->c, s->got < MSG ? s->msg + s->got : tmp, want,
				    SC_NONBLOCK);

		if (r == -EAGAIN)
			return 0;
		if (r == 0) {
			T_ASSERTF(s->got == MSG, "EOF after %zu bytes of a message", s->got);
			T_ASSERTF(!s->eof, "connection %d reported EOF twice?", s->idx);
			return 1;
		}
		if (r < 0)
			T_FAIL("recv on connection %d returned %zd%s", s->idx, r, t_errname_(r));
		T_ASSERTF(s->got < MSG, "connection %d: %zd bytes beyond the message",
			  s->idx, r);
		s->got += (size_t)r;
		if (s->got == MSG && !s->replied) {
			char want_msg[MSG], reply[MSG];
			int idx = -1;

			T_ASSERTF(sscanf(s->msg, "c2s %d ", &idx) == 1 && idx >= 0 &&
				  idx < NCONN, "bad message %.*s", MSG - 1, s->msg);
			make_msg(want_msg, "c2s", idx);
			T_ASSERTF(memcmp(want_msg, s->msg, MSG) == 0,
				  "message mismatch: got %.*s want %.*s", MSG - 1, s->msg,
				  MSG - 1, want_msg);
			T_ASSERTF(!seen[idx], "message %d arrived on two connections", idx);
			seen[idx] = 1;
			s->idx = idx;
			make_msg(reply, "s2c", idx);
			T_EQ(sc_send(s->c, reply, MSG, 0), MSG);
			s->replied = 1;
		}
	}
}

static int server(const char *path, void *arg)
{
	struct sc_listener *l = NULL;
	struct sc_chan *ch = NULL;
	struct sconn *conns = calloc(NCONN, sizeof *conns);
	struct sconn *by_idx[NCONN];
	int seen[NCONN] = { 0 }, order[NCONN];
	struct sc_conn *out[64];
	char closed_by_client[NCONN];
	int replied = 0, eofs = 0, want_eofs = 0, waits = 0, reported = 0;
	struct sc_stats st;
	struct t_rng rng;

	T_ASSERT(conns != NULL);
	close(pipe_c2s[1]);
	close(pipe_s2c[0]);
	t_rng_seed(&rng, base_seed ^ 0x5e);
	T_OK(sc_listen(path, NCONN, &l));
	T_OK(sc_chan_open(&ch));
	T_ASSERT(sc_chan_fd(ch) >= 0);
	for (int i = 0; i < NCONN; i++) {
		struct sc_conn *c = NULL;
		int r = sc_accept(l, &c, 0);

		if (r < 0)
			T_FAIL("sc_accept #%d returned %d%s", i, r, t_errname_(r));
		conns[i].c = c;
		conns[i].idx = -1;
		sc_set_nonblock(c, 1);
		sc_conn_set_user(c, &conns[i]);
		T_ASSERT(sc_conn_user(c) == &conns[i]);
		r = sc_chan_bind(c, ch);
		if (r != 0)
			T_FAIL("sc_chan_bind #%d returned %d%s", i, r, t_errname_(r));
	}
	t_log("many: server accepted %d connections, all bound to one channel", NCONN);

	/* requests -> replies, only through sc_chan_wait reports */
	while (replied < NCONN) {
		int n = sc_chan_wait(ch, out, 64, 10000);

		T_ASSERTF(n >= 0, "sc_chan_wait returned %d%s", n, t_errname_(n));
		T_ASSERTF(n > 0, "sc_chan_wait timed out with %d of %d connections served",
			  replied, NCONN);
		T_ASSERT(n <= 64);
		waits++;
		reported += n;
		for (int k = 0; k < n; k++) {
			struct sconn *s = sc_conn_user(out[k]);
			int was = s->replied;

			T_ASSERT(s >= conns && s < conns + NCONN && s->c == out[k]);
			T_EQ(drain(s, seen), 0);
			replied += s->replied - was;
		}
	}
	t_log("many: server answered %d requests in %d sc_chan_wait calls (%d reports)",
	      NCONN, waits, reported);
	for (int i = 0; i < NCONN; i++)
		by_idx[conns[i].idx] = &conns[i];
	t_write_full(pipe_s2c[1], "r", 1);      /* out of the request loop */

	/* the client closes a random half and tells us which */
	t_read_full(pipe_c2s[0], closed_by_client, NCONN);
	for (int i = 0; i < NCONN; i++)
		want_eofs += closed_by_client[i];
	while (eofs < want_eofs) {
		int n = sc_chan_wait(ch, out, 64, 10000);

		T_ASSERTF(n > 0, "sc_chan_wait returned %d with %d of %d EOFs seen", n,
			  eofs, want_eofs);
		for (int k = 0; k < n; k++) {
			struct sconn *s = sc_conn_user(out[k]);

			if (s->eof)
				continue;
			if (drain(s, seen)) {
				T_ASSERTF(closed_by_client[s->idx],
					  "EOF on connection %d, which the client did not close",
					  s->idx);
				s->eof = 1;
				eofs++;
			}
		}
	}
	/* nothing else ended */
	for (int i = 0; i < NCONN; i++) {
		char b;

		if (!closed_by_client[i])
			T_EQ(sc_recv(by_idx[i]->c, &b, 1, SC_NONBLOCK), -EAGAIN);
	}
	t_log("many: client closed %d connections -> server saw EOF on exactly those",
	      want_eofs);

	/* close the others in random order; the client sees EOF on them */
	for (int i = 0; i < NCONN; i++)
		order[i] = i;
	t_shuffle(&rng, order, NCONN);
	for (int i = 0; i < NCONN; i++)
		if (!closed_by_client[order[i]])
			T_EQ(sc_close(by_idx[order[i]]->c), 0);
	for (int i = 0; i < NCONN; i++)
		if (closed_by_client[order[i]])
			T_EQ(sc_close(by_idx[order[i]]->c), 0);
	sc_chan_close(ch);
	sc_listener_close(l);

	sc_stats_get(&st);
	t_log("many: server stats: %llu opened, %llu closed, %llu groups joined, "
	      "%llu created", (unsigned long long)st.conns_opened,
	      (unsigned long long)st.conns_closed, (unsigned long long)st.groups_joined,
	      (unsigned long long)st.groups_created);
	T_EQ(st.conns_opened, NCONN);
	T_EQ(st.conns_closed, NCONN);
	T_EQ(st.conns_aborted, 0);
	T_ASSERTF(st.groups_joined >= MIN_GROUPS, "groups_joined %llu",
		  (unsigned long long)st.groups_joined);
	T_EQ(st.groups_created, 0);
	free(conns);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn **c = calloc(NCONN, sizeof *c);
	int order[NCONN];
	char closed[NCONN];
	struct t_rng rng;
	struct sc_stats st;
	struct sc_conn_info info;

	T_ASSERT(c != NULL);
	close(pipe_c2s[0]);
	close(pipe_s2c[1]);
	t_rng_seed(&rng, base_seed ^ 0xc1);
	c[0] = t_connect_retry(path, 0, 5000);
	for (int i = 1; i < NCONN; i++) {
		int r = sc_connect(path, &c[i], 0);

		if (r < 0)
			T_FAIL("sc_connect #%d returned %d%s", i, r, t_errname_(r));
	}
	T_EQ(sc_conn_info(c[0], &info), 0);
	T_EQ(info.side, 0);
	T_EQ(sc_conn_info(c[NCONN - 1], &info), 0);
	T_EQ(info.side, 0);

	for (int i = 0; i < NCONN; i++)
		order[i] = i;
	t_shuffle(&rng, order, NCONN);
	for (int i = 0; i < NCONN; i++) {
		char m[MSG];

		make_msg(m, "c2s", order[i]);
		t_send_all(c[order[i]], m, MSG);
	}
	t_shuffle(&rng, order, NCONN);
	for (int i = 0; i < NCONN; i++) {
		char m[MSG], want[MSG];
		ssize_t r = sc_recv(c[order[i]], m, MSG, SC_WAITALL);

		if (r != MSG)
			T_FAIL("reply on connection %d: recv returned %zd%s", order[i], r,
			       t_errname_(r));
		make_msg(want, "s2c", order[i]);
		T_ASSERTF(memcmp(m, want, MSG) == 0, "connection %d got reply %.*s, "
			  "want %.*s", order[i], MSG - 1, m, MSG - 1, want);
	}
	t_log("many: client sent and received %d distinct messages", NCONN);

	/* close a random half in random order, once the server is done with
	 * the requests */
	{
		char r;

		t_read_full(pipe_s2c[0], &r, 1);
	}
	memset(closed, 0, sizeof closed);
	t_shuffle(&rng, order, NCONN);
	for (int i = 0; i < NCONN / 2; i++) {
		closed[order[i]] = 1;
		T_EQ(sc_close(c[order[i]]), 0);
	}
	t_write_full(pipe_c2s[1], closed, NCONN);
	/* the server closes the rest: EOF on each, in random order */
	t_shuffle(&rng, order, NCONN);
	for (int i = 0; i < NCONN; i++) {
		char b;

		if (closed[order[i]])
			continue;
		T_EQ(sc_recv(c[order[i]], &b, 1, 0), 0);
		T_EQ(sc_close(c[order[i]]), 0);
	}
	sc_stats_get(&st);
	t_log("many: client stats: %llu opened, %llu closed, %llu groups created, "
	      "%llu joined", (unsigned long long)st.conns_opened,
	      (unsigned long long)st.conns_closed, (unsigned long long)st.groups_created,
	      (unsigned long long)st.groups_joined);
	T_EQ(st.conns_opened, NCONN);
	T_EQ(st.conns_closed, NCONN);
	T_EQ(st.conns_aborted, 0);
	T_ASSERTF(st.groups_created >= MIN_GROUPS, "groups_created %llu",
		  (unsigned long long)st.groups_created);
	T_EQ(st.groups_joined, 0);
	free(c);
	return 0;
}

T_TEST(thousand)
{
	char path[T_PATH_MAX];
	long lim = t_raise_nofile();

	if (lim < 8192) {
		char m[100];

		snprintf(m, sizeof m, "RLIMIT_NOFILE hard limit %ld < 8192", lim);
		t_skip(m);
	}
	base_seed = t_seed();
	T_EQ(pipe(pipe_c2s), 0);
	T_EQ(pipe(pipe_s2c), 0);
	t_log("many: %d connections between two processes, one completion channel "
	      "on the server", NCONN);
	t_run_pair(t_listen_path(path), server, client, NULL);
}

T_MAIN(NULL, T_ENTRY(thousand))
