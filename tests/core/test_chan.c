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
 * TSan).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

T_MAIN(setup, T_ENTRY(shared), T_ENTRY(peer_gone), T_ENTRY(once_per_call))
