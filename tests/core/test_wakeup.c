/* SPDX-License-Identifier: MIT */
/*
 * Regression: lost wake-ups between arming and sleeping.
 *
 * Bug pinned (found by a ping-pong that hung about once in 200 runs): the
 * producer used to *take* the consumer's rx_armed flag.  A producer that
 * took the flag while the consumer had not yet armed its cell could not wake
 * anybody, and the consumer's next sleep then had no flag left for the next
 * message.  Now only the owner clears its flag.  Short spin budgets make both
 * sides arm and sleep constantly, which is where such races live; a hang is
 * caught by an alarm rather than the runner's time limit.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "t_util.h"

static long rounds;

static int server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char buf[64];
	ssize_t n;

	alarm(60);
	while ((n = sc_recv(c, buf, sizeof(buf), SC_WAITALL)) == sizeof(buf))
		t_send_all(c, buf, sizeof(buf));
	T_EQ(n, 0);
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_conn_info in;
	char buf[64];

	alarm(60);
	for (long i = 0; i < rounds; i++) {
		memset(buf, (int)i, sizeof(buf));
		t_send_all(c, buf, sizeof(buf));
		t_recv_all(c, buf, sizeof(buf));
		T_EQ(buf[10], (char)i);
	}
	T_OK(sc_conn_info(c, &in));
	t_log("  %ld round trips, %llu sleeps", rounds, (unsigned long long)in.sleeps);
	sc_close(c);
	return 0;
}

/* One direction, tiny rings: the producer blocks on a full ring over and
 * over (tx_blocked path), the consumer on an empty one. */
static int st_server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	static char buf[70000];
	uint64_t off = 0;
	ssize_t n;

	alarm(60);
	while ((n = sc_recv(c, buf, 1 + (size_t)(off % sizeof(buf)), 0)) > 0) {
		T_PAT_CHECK(7, off, buf, (size_t)n);
		off += (uint64_t)n;
	}
	T_EQ(n, 0);
	T_EQ(off, *(uint64_t *)arg);
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

static int st_client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	static char buf[70000];
	uint64_t total = *(uint64_t *)arg, off = 0;

	alarm(60);
	while (off < total) {
		size_t n = 1 + (size_t)((off * 7919) % sizeof(buf));
		if (n > total - off)
			n = (size_t)(total - off);
		t_pat_fill(7, off, buf, n);
		t_send_all(c, buf, n);
		off += n;
	}
	sc_close(c);
	return 0;
}

/* White-box, one process: the producer's wake attempt must leave the
 * consumer's flag alone when the consumer's cell is not armed yet. */
static int flag_owner(void *arg)
{
	char path[T_PATH_MAX], b[8];
	struct sc_listener *l;
	struct sc_conn *cli, *srv;

	t_log("a producer never clears the consumer's rx_armed");
	T_OK(sc_listen(t_listen_path(path), 0, &l));
	T_OK(sc_connect(path, &cli, 0));
	T_OK(sc_accept(l, &srv, 0));
	T_OK(sc_conn_fd(srv));                  /* gives srv a cell, sets the edge flag */
	_Atomic uint32_t *rx_armed = &srv->rx.h->rx_armed;
	T_ASSERT(atomic_load(rx_armed) & SC_ARM_EDGE);
	/* the consumer is between raising its flag and arming its cell */
	atomic_store(&srv->g->my_cells[srv->cell].armed, 0);
	T_EQ(sc_send(cli, "x", 1, 0), 1);
	T_ASSERT(atomic_load(rx_armed) & SC_ARM_EDGE);   /* still the consumer's */
	/* once armed, the next message wakes it */
	atomic_store(&srv->g->my_cells[srv->cell].armed, SC_ARM_POLL);
	T_EQ(sc_send(cli, "y", 1, 0), 1);
	T_EQ(atomic_load(&srv->g->my_cells[srv->cell].armed), 0);
	T_EQ(sc_recv(srv, b, 2, SC_WAITALL), 2);
	/* polled through its fd: the edge interest outlives the read, so
	 * the next message signals the fd again */
	T_ASSERT(atomic_load(rx_armed) & SC_ARM_EDGE);
	sc_close(cli);
	sc_close(srv);

	/* not polled: the edge set by an EAGAIN lasts until data moves */
	T_OK(sc_connect(path, &cli, 0));
	T_OK(sc_accept(l, &srv, 0));
	rx_armed = &srv->rx.h->rx_armed;
	T_EQ(sc_recv(srv, b, 1, SC_NONBLOCK), -EAGAIN);
	T_ASSERT(atomic_load(rx_armed) & SC_ARM_EDGE);
	T_EQ(sc_send(cli, "z", 1, 0), 1);
	T_EQ(sc_recv(srv, b, 1, 0), 1);
	T_ASSERT(!(atomic_load(rx_armed) & SC_ARM_EDGE));  /* reading drops it */
	sc_close(cli);
	sc_close(srv);
	sc_listener_close(l);
	return 0;
}

/* White-box, one process (found with nginx proxy_pass under shortcut run:
 * a connection per request, each one's cell handed out anew).  A waker
 * that read a cell's generation just before its owner stored the next one
 * finds a newer generation already known (its CELL message read): that
 * cell's wake socket is the one now.  It used to be called a protocol
 * error, and the connection was reset (nginx answered 502). */
static int recycled_cell(void *arg)
{
	char path[T_PATH_MAX], b[8];
	struct sc_listener *l;
	struct sc_conn *cli, *srv;

	t_log("a wake-up that read a recycled cell's older generation is delivered");
	T_OK(sc_listen(t_listen_path(path), 0, &l));
	T_OK(sc_connect(path, &cli, 0));
	T_OK(sc_accept(l, &srv, 0));
	int fd = sc_conn_fd(srv);               /* srv's cell: its CELL message sent */
	T_ASSERT(fd >= 0);
	struct sc_cell *cell = &srv->g->my_cells[srv->cell];
	uint32_t gen = atomic_load(&cell->wake_gen);
	sc__group_pump(cli->g);                 /* the peer read it */
	T_EQ(__atomic_load_n(&cli->g->peer_gen[srv->cell], __ATOMIC_ACQUIRE), gen);
	/* what the waker reads: the generation before the owner's store */
	atomic_store(&cell->wake_gen, gen - 1);
	atomic_store(&cell->armed, SC_ARM_POLL);
	T_EQ(sc_send(cli, "x", 1, 0), 1);
	T_EQ(atomic_load(&cli->err), 0);        /* no protocol error */
	T_EQ(atomic_load(&cell->armed), 0);     /* the token was taken */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	T_EQ(poll(&p, 1, 5000), 1);             /* and the wake-up came */
	atomic_store(&cell->wake_gen, gen);
	T_EQ(sc_recv(srv, b, 1, 0), 1);
	T_EQ(sc_send(cli, "y", 1, 0), 1);
	T_EQ(sc_recv(srv, b, 1, 0), 1);
	T_EQ(atomic_load(&srv->err), 0);
	sc_close(cli);
	sc_close(srv);
	sc_listener_close(l);
	return 0;
}

static const char *spins[] = { "0", "1", "3" };

T_TEST(flag_owner)
{
	t_wait_ok(t_fork(flag_owner, NULL));
}

T_TEST(recycled_cell)
{
	t_wait_ok(t_fork(recycled_cell, NULL));
}

T_TEST(ping_pong)
{
	char path[T_PATH_MAX];

	rounds = (long)t_scale(40000, 3000);
	for (int k = 0; k < 3; k++) {
		setenv("SHORTCUT_SPIN_US", spins[k], 1);
		for (int rep = 0; rep < 3; rep++) {
			t_log("ping-pong, SHORTCUT_SPIN_US=%s, pair %d", spins[k], rep);
			t_run_pair(t_listen_path(path), server, client, NULL);
		}
	}
	unsetenv("SHORTCUT_SPIN_US");
}

T_TEST(stream)
{
	char path[T_PATH_MAX];
	uint64_t total = t_scale(32 << 20, 4 << 20);

	setenv("SHORTCUT_RMEM", "16K", 1);
	setenv("SHORTCUT_WMEM", "16K", 1);
	for (int k = 0; k < 3; k++) {
		setenv("SHORTCUT_SPIN_US", spins[k], 1);
		t_log("stream through 16 KiB rings, SHORTCUT_SPIN_US=%s", spins[k]);
		t_run_pair(t_listen_path(path), st_server, st_client, &total);
	}
	unsetenv("SHORTCUT_SPIN_US");
	unsetenv("SHORTCUT_RMEM");
	unsetenv("SHORTCUT_WMEM");
}

T_MAIN(NULL,
       T_ENTRY(flag_owner),
       T_ENTRY(recycled_cell),
       T_ENTRY(ping_pong),
       T_ENTRY(stream))
