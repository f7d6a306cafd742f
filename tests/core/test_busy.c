/* SPDX-License-Identifier: MIT */
/*
 * A busy stream makes no system calls: with a spin budget longer than the
 * peer's turn-around, a ping-pong of many messages never sleeps and never
 * writes an eventfd (the library counts both: each is one system call).
 * tests/integration/test_cli.py also runs this program under strace -c.
 * A wait on a crowded machine (threads waiting for a CPU, spin.c) does not
 * spin (spin.c): such waits are counted, and each may cost a sleep here
 * and a wake-up call on the other side, which the bounds allow for.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t_util.h"

#define MSGS 200000

static int server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	char buf[64];

	for (int i = 0; i < MSGS; i++) {
		t_recv_all(c, buf, sizeof(buf));
		T_EQ(buf[0], (char)i);
		t_send_all(c, buf, sizeof(buf));
	}
	/* our waits that slept without spinning: the client's wake-ups */
	struct sc_stats st;
	sc_stats_get(&st);
	t_send_all(c, &st.spins_crowded, sizeof(st.spins_crowded));
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	struct sc_conn_info in;
	char buf[64];

	/* warm up: the first exchange may sleep while the server accepts */
	memset(buf, 0, sizeof(buf));
	t_send_all(c, buf, sizeof(buf));
	t_recv_all(c, buf, sizeof(buf));
	T_OK(sc_conn_info(c, &in));
	uint64_t sleeps0 = in.sleeps, wake0 = in.wakeups_sent;
	struct sc_stats st;
	sc_stats_get(&st);
	uint64_t crowded0 = st.spins_crowded;
	for (int i = 1; i < MSGS; i++) {
		memset(buf, i, sizeof(buf));
		t_send_all(c, buf, sizeof(buf));
		t_recv_all(c, buf, sizeof(buf));
		T_EQ(buf[63], (char)i);
	}
	T_OK(sc_conn_info(c, &in));
	sc_stats_get(&st);
	uint64_t crowded = st.spins_crowded - crowded0, peer_crowded;
	t_recv_all(c, &peer_crowded, sizeof(peer_crowded));
	t_log("%d round trips: %llu sleeps, %llu wake-up calls; waits on a crowded machine "
	      "(no spin): %llu here, %llu in the server", MSGS,
	      (unsigned long long)(in.sleeps - sleeps0),
	      (unsigned long long)(in.wakeups_sent - wake0), (unsigned long long)crowded,
	      (unsigned long long)peer_crowded);
	/* a loaded machine may deschedule a peer longer than the budget now
	 * and then; "no system calls" means none per message, not none ever */
	T_ASSERT(in.sleeps - sleeps0 < MSGS / 100 + crowded);
	T_ASSERT(in.wakeups_sent - wake0 < MSGS / 100 + peer_crowded);
	sc_close(c);
	return 0;
}

T_TEST(ping_pong)
{
	char path[T_PATH_MAX];

	if (t_sanitizer() || sysconf(_SC_NPROCESSORS_ONLN) < 2)
		t_skip("needs 2 CPUs and native speed (spinning peers)");
	/* one second of spin: longer than any turn-around here */
	setenv("SHORTCUT_SPIN_US", "1000000", 1);
	t_run_pair(t_listen_path(path), server, client, NULL);
}

T_MAIN(NULL, T_ENTRY(ping_pong))
