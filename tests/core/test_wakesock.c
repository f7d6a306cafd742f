/* SPDX-License-Identifier: MIT */
/*
 * Regression (found in review): a polled channel used to hand one eventfd to
 * every peer with a connection on it.  A hostile peer could clear the
 * eventfd's O_NONBLOCK (shared file description: the victim's reads then
 * blocked past their timeout) or drain it (stealing an honest peer's
 * wake-up).  Now each link group gets its own wake socket; this test has a
 * hostile peer do both to its end while an honest peer keeps sending, and
 * checks that the victim's sc_chan_wait keeps its timeouts and sees every
 * honest byte.  The honest peer is started once the victim has accepted
 * the hostile one (so c[0] is the hostile peer's by construction, not by a
 * sleep), and stays until it is killed at the end.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "t_util.h"

static char path[T_PATH_MAX];
static int bound[2], tampered[2], go[2], first[2];

static void sig(int fd, char v) { t_write_full(fd, &v, 1); }
static char wt(int fd) { char b; t_read_full(fd, &b, 1); return b; }

static int victim(void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c[2];
	struct sc_chan *ch;
	char b[16];

	alarm(30);
	T_OK(sc_listen(path, 0, &l));
	T_OK(sc_accept(l, &c[0], 0));          /* the hostile peer's */
	sig(first[1], 1);
	T_OK(sc_accept(l, &c[1], 0));
	T_OK(sc_chan_open(&ch));
	for (int i = 0; i < 2; i++)
		T_OK(sc_chan_bind(c[i], ch));
	sig(bound[1], 1);
	sig(bound[1], 1);
	int got = 0;
	while (got < 5) {
		struct sc_conn *r[2];
		uint64_t t0 = t_now_ms();
		int n = sc_chan_wait(ch, r, 2, 200);
		/* never blocked past the timeout by what a peer did */
		T_ASSERTF(t_now_ms() - t0 < 1000, "sc_chan_wait took %llu ms",
			  (unsigned long long)(t_now_ms() - t0));
		for (int i = 0; i < n; i++) {
			ssize_t k;
			while ((k = sc_recv(r[i], b, sizeof(b), SC_NONBLOCK)) > 0)
				if (r[i] == c[1])
					got += (int)k;
		}
	}
	for (int i = 0; i < 2; i++)
		sc_close(c[i]);
	sc_chan_close(ch);
	sc_listener_close(l);
	return 0;
}

static int hostile(void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	char b[64];

	wt(bound[0]);
	/* the victim's wake socket for our group: make it blocking and keep
	 * draining it */
	uint32_t idx = atomic_load(&c->peer->cell);
	uint32_t gen = atomic_load(&c->g->peer_cells[idx].wake_gen);
	int fd = sc__group_peer_wake(c->g, idx, gen);
	T_ASSERT(fd >= 0);
	T_OK(fcntl(fd, F_SETFL, 0));
	sig(tampered[1], 1);
	for (;;)
		if (recv(fd, b, sizeof(b), MSG_DONTWAIT) < 0)
			t_sleep_ms(1);
	return 0;
}

static int honest(void *arg)
{
	wt(go[0]);
	struct sc_conn *c = t_connect_retry(path, 0, 5000);

	wt(bound[0]);
	wt(tampered[0]);
	for (int i = 0; i < 5; i++) {
		t_send_all(c, "x", 1);
		t_sleep_ms(50);
	}
	for (;;)                /* stay until the victim read everything */
		pause();
	sc_close(c);
	return 0;
}

T_TEST(hostile_peer)
{
	T_OK(pipe(bound));
	T_OK(pipe(tampered));
	T_OK(pipe(go));
	T_OK(pipe(first));
	t_listen_path(path);
	t_log("a peer that tampers with its wake socket cannot stall or rob the victim");
	pid_t v = t_fork(victim, NULL);
	pid_t h = t_fork(hostile, NULL);
	wt(first[0]);                   /* the hostile peer connected first */
	pid_t o = t_fork(honest, NULL);
	sig(go[1], 1);
	t_wait_ok(v);
	kill(h, SIGKILL);
	kill(o, SIGKILL);
	t_wait_status(h);
	t_wait_status(o);
}

T_MAIN(NULL, T_ENTRY(hostile_peer))
