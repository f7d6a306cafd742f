/* SPDX-License-Identifier: MIT */
/*
 * Completion channels shared by several connections and threads.
 *
 * Regressions pinned (found in review): two threads blocked in sc_recv on two
 * connections bound to one shared channel lost wake-ups (both slept on the
 * channel's eventfd and one consumed the other's count); sc_conn_fd and
 * sc_chan_bind failed with ECONNRESET on a connection whose peer had already
 * sent, closed and exited, though its data and end of stream were there;
 * sc_chan_wait reported one connection twice when it changed again between
 * the call's passes (the control thread seeing the peer's death, CI under
 * TSan).  idle_cell: a shared channel keeps a group's cell (and the wake
 * socket its peer holds) from one connection to the next, and drops it
 * once the group is dead.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "notify.h"
#include "t_util.h"

static long rounds;
static struct sc_conn *srv[2], *cli[2];

static void *echo(void *p)
{
	struct sc_conn *c = srv[(long)p];
	char b;
	ssize_t n;

	while ((n = sc_recv(c, &b, 1, 0)) == 1)
		t_send_all(c, &b, 1);
	T_EQ(n, 0);
	return NULL;
}

static int shared_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_chan *ch;
	pthread_t t[2];

	alarm(60);
	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_accept(l, &srv[0], 0));
	T_OK(sc_accept(l, &srv[1], 0));
	T_OK(sc_chan_open(&ch));
	T_OK(sc_chan_bind(srv[0], ch));
	T_OK(sc_chan_bind(srv[1], ch));
	for (long i = 0; i < 2; i++)
		T_EQ(pthread_create(&t[i], NULL, echo, (void *)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++)
		sc_close(srv[i]);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static void *pinger(void *p)
{
	struct sc_conn *c = cli[(long)p];
	/* the two streams run at different lengths: one goes idle while the
	 * other still needs its wake-ups */
	long n = rounds * (1 + (long)p);
	char b = 'a';

	for (long r = 0; r < n; r++) {
		t_send_all(c, &b, 1);
		t_recv_all(c, &b, 1);
	}
	sc_shutdown(c, SHUT_WR);
	return NULL;
}

static int shared_client(const char *path, void *arg)
{
	pthread_t t[2];

	alarm(60);
	cli[0] = t_connect_retry(path, 0, 5000);
	cli[1] = t_connect_retry(path, 0, 5000);
	for (long i = 0; i < 2; i++)
		T_EQ(pthread_create(&t[i], NULL, pinger, (void *)i), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++)
		sc_close(cli[i]);
	return 0;
}

static int gone_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c;
	struct sc_chan *ch;
	char b[8];

	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_accept(l, &c, 0));
	/* the client's process has exited (its group is then dead): wait for
	 * it (a zombie, or reaped and gone), not for a fixed time */
	{
		struct sc_conn_info info;
		uint64_t t0 = t_now_ms();
		char st;

		T_OK(sc_conn_info(c, &info));
		while ((st = t_state_of(info.peer_pid, info.peer_pid)) != 'Z' && st != '?') {
			T_ASSERTF(t_now_ms() - t0 < 10000, "the client (pid %d) did not exit: "
				  "state %c", (int)info.peer_pid, st);
			t_sleep_ms(1);
		}
	}
	T_OK(sc_conn_fd(c));
	T_OK(sc_chan_open(&ch));
	T_OK(sc_chan_bind(c, ch));
	struct sc_conn *ready[4];
	T_EQ(sc_chan_wait(ch, ready, 4, 1000), 1);
	T_ASSERT(ready[0] == c);
	T_EQ(sc_recv(c, b, sizeof(b), SC_NONBLOCK), 3);
	T_ASSERT(!memcmp(b, "req", 3));
	T_EQ(sc_recv(c, b, sizeof(b), SC_NONBLOCK), 0);
	sc_close(c);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static int gone_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);

	t_send_all(c, "req", 3);
	sc_close(c);
	return 0;
}

static int once_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c, *ready[4];
	struct sc_chan *ch;
	char b[4096];
	long waits = 0;
	ssize_t n = 1;

	alarm(60);
	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_accept(l, &c, 0));
	T_OK(sc_chan_open(&ch));
	T_OK(sc_chan_bind(c, ch));
	while (n != 0) {
		/* the sender's next byte may come between the call's passes */
		int k = sc_chan_wait(ch, ready, 4, 5000);
		/* (a call that fills ready[] may name it again) */
		T_ASSERTF(k == 1 || k == 4, "sc_chan_wait reported %d connections, one bound", k);
		for (int i = 0; i < k; i++)
			T_ASSERT(ready[i] == c);
		while ((n = sc_recv(c, b, sizeof(b), SC_NONBLOCK)) > 0)
			;
		T_ASSERT(n == 0 || n == -EAGAIN);
		waits++;
	}
	t_log("  %ld waits, each reporting the one connection once (or filling ready[])", waits);
	sc_close(c);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static int once_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	long n = (long)t_scale(200000, 20000);

	for (long i = 0; i < n; i++)
		t_send_all(c, "x", 1);
	sc_close(c);
	return 0;
}

static int idle_go[2];

/* One byte each way on c, woken through ch, then c's end of stream. */
static void idle_exchange(struct sc_chan *ch, struct sc_conn *c, char want)
{
	struct sc_conn *ready[4];
	char b;
	ssize_t n;

	while ((n = sc_recv(c, &b, 1, SC_NONBLOCK)) == -EAGAIN)
		T_ASSERT(sc_chan_wait(ch, ready, 4, 5000) > 0);
	T_EQ(n, 1);
	T_ASSERT(b == want);
	b = (char)(want - 'a' + 'A');
	t_send_all(c, &b, 1);
	while ((n = sc_recv(c, &b, 1, SC_NONBLOCK)) == -EAGAIN)
		T_ASSERT(sc_chan_wait(ch, ready, 4, 5000) > 0);
	T_EQ(n, 0);
}

static int idle_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c, *ready[4];
	struct sc_chan *ch;

	alarm(60);
	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_chan_open(&ch));
	T_OK(sc_accept(l, &c, 0));
	T_OK(sc_chan_bind(c, ch));
	struct sc_group *g = c->g;
	uint32_t gen = g->my_gen;       /* its cell's wake socket sent */
	idle_exchange(ch, c, 'a');
	sc_close(c);
	t_log("  the group's last connection closed: its cell stays (cells %d, idle %d)",
	      ch->ncells, ch->nidle);
	T_EQ(ch->ncells, 1);
	T_EQ(ch->nidle, 1);
	T_OK(sc_accept(l, &c, 0));
	T_ASSERT(c->g == g);
	T_OK(sc_chan_bind(c, ch));
	T_EQ(ch->nidle, 0);
	T_EQ(g->my_gen, gen);           /* no new wake socket for the peer */
	idle_exchange(ch, c, 'b');      /* woken through the kept one */
	sc_close(c);
	T_EQ(ch->nidle, 1);
	t_write_full(idle_go[1], "x", 1);       /* the client may exit */
	/* the client has exited: once its group is dead, a wait drops the
	 * cell (the group is freed then) */
	uint64_t t0 = t_now_ms();
	while (ch->ncells) {
		T_ASSERTF(t_now_ms() - t0 < 10000, "the dead group's idle cell stayed: %d", ch->ncells);
		sc_chan_wait(ch, ready, 4, 10);
	}
	T_EQ(ch->nidle, 0);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static int idle_client(const char *path, void *arg)
{
	char b;

	alarm(60);

	for (char x = 'a'; x <= 'b'; x++) {
		/* (one at a time: the group's only connection) */
		struct sc_conn *c = t_connect_retry(path, 0, 5000);
		t_send_all(c, &x, 1);
		t_recv_all(c, &b, 1);
		T_ASSERT(b == x - 'a' + 'A');
		sc_close(c);
	}
	t_read_full(idle_go[0], &b, 1);         /* (its group lives till then) */
	return 0;
}

/* no spin: a waiter sleeps on the channel at once (both scenarios) */
static void setup(void)
{
	setenv("SHORTCUT_SPIN_US", "0", 1);
}

T_TEST(shared)
{
	char path[T_PATH_MAX];

	t_log("two blocked threads, two connections, one shared channel, no spin");
	rounds = (long)t_scale(3000, 500);
	t_run_pair(t_listen_path(path), shared_server, shared_client, NULL);
}

T_TEST(peer_gone)
{
	char path[T_PATH_MAX];

	t_log("a connection whose peer sent, closed and exited can still be polled");
	t_run_pair(t_listen_path(path), gone_server, gone_client, NULL);
}

T_TEST(once_per_call)
{
	char path[T_PATH_MAX];

	t_log("a connection that changes again during a wait is reported once by it");
	t_run_pair(t_listen_path(path), once_server, once_client, NULL);
}

T_TEST(idle_cell)
{
	char path[T_PATH_MAX];

	t_log("a shared channel keeps a link group's cell for its next connection");
	T_OK(pipe(idle_go) ? -errno : 0);
	t_run_pair(t_listen_path(path), idle_server, idle_client, NULL);
}

T_MAIN(setup, T_ENTRY(shared), T_ENTRY(peer_gone), T_ENTRY(once_per_call),
       T_ENTRY(idle_cell))
