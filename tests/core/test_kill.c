/* SPDX-License-Identifier: MIT */
/*
 * Peer death: a peer process sends a few bytes and blocks forever; we read
 * them, then SIGKILL it while we wait (in sc_recv, or in sc_send with a full
 * ring).  The wait must end with -ECONNRESET (or 0 / a partial count for
 * send) within 1 s.  Both roles: the killed peer connected to us, or it
 * accepted our connection.  Afterwards every fd, memfd mapping and file the
 * library used must be gone.  The kill comes once our waiting thread is
 * asleep in the call (its state), not after a fixed time; the fds and
 * mappings are given 10 s to go (they go as soon as they can: a hang
 * guard, not a deadline).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_util.h"

#define HELLO_LEN 100
#define HELLO_SEED 0x4e110u
#define NCASES 4
#define DETECT_LIMIT_MS 1000

struct victim {
	int idx;
	int accepts;                /* 1: victim listens and accepts */
	char path[T_PATH_MAX];      /* where the connection is made */
	int go_rd, go_wr;           /* parent -> victim "start" pipe */
	pid_t pid;
};

static struct victim victims[NCASES];
static int n_reset_seen;    /* cases where we got -ECONNRESET at some point */

static int victim_main(void *arg)
{
	struct victim *v = arg;
	struct sc_conn *c;
	struct sc_listener *l = NULL;
	char buf[HELLO_LEN], go;

	/* drop the other victims' pipe ends (the parent already closed every
	 * read end but ours) */
	for (int i = 0; i < NCASES; i++)
		if (i != v->idx && victims[i].go_wr >= 0)
			close(victims[i].go_wr);
	close(v->go_wr);
	if (v->accepts)
		T_OK(sc_listen(v->path, 0, &l));
	t_read_full(v->go_rd, &go, 1);
	if (v->accepts)
		T_OK(sc_accept(l, &c, 0));
	else
		c = t_connect_retry(v->path, 0, 5000);
	t_pat_fill(HELLO_SEED + (uint64_t)v->idx, 0, buf, sizeof buf);
	t_send_all(c, buf, sizeof buf);
	for (;;)
		pause();
	return 1;
}

struct killer {
	pid_t pid;
	pid_t waiter;               /* our thread that waits in the call */
	uint64_t t_kill_us;
};

static void *killer_main(void *p)
{
	struct killer *k = p;

	/* the waiter had nothing to sleep in before the call */
	t_wait_asleep(getpid(), k->waiter, 10000, "kill: our thread in its wait");
	k->t_kill_us = t_now_us();
	if (kill(k->pid, SIGKILL) != 0)
		T_FAIL("kill(%d): %s", (int)k->pid, strerror(errno));
	return NULL;
}

static void check_dead(pid_t pid)
{
	int st = t_wait_status(pid);

	T_ASSERTF(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		  "victim %d %s, expected killed by SIGKILL", (int)pid, t_status_str(st));
}

static void run_case(struct victim *v, struct sc_listener *l, int in_send)
{
	struct sc_conn *c = NULL;
	struct sc_conn_info info;
	struct killer k = { v->pid, (pid_t)gettid(), 0 };
	pthread_t th;
	char buf[HELLO_LEN];
	uint64_t t_ret, ms;
	ssize_t r;
	int saw_reset = 0;

	t_log("kill: peer %s, we wait in %s when it is killed -> -ECONNRESET within "
	      "%d ms", v->accepts ? "accepted our connection" : "connected to us",
	      in_send ? "sc_send with a full ring" : "sc_recv", DETECT_LIMIT_MS);
	t_write_full(v->go_wr, "g", 1);
	if (v->accepts) {
		c = t_connect_retry(v->path, 0, 5000);
	} else {
		T_OK(sc_accept(l, &c, 0));
	}
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.peer_pid, v->pid);
	T_EQ(info.side, v->accepts ? 0 : 1);

	t_recv_all(c, buf, sizeof buf);
	T_PAT_CHECK(HELLO_SEED + (uint64_t)v->idx, 0, buf, sizeof buf);

	T_EQ(pthread_create(&th, NULL, killer_main, &k), 0);
	if (!in_send) {
		r = sc_recv(c, buf, sizeof buf, 0);
		t_ret = t_now_us();
		saw_reset |= r == -ECONNRESET;
		T_EQ(pthread_join(th, NULL), 0);
		T_ASSERTF(r == -ECONNRESET || r == 0,
			  "blocked sc_recv returned %zd%s after the peer was killed",
			  r, t_errname_(r));
	} else {
		/* more than fits: the send blocks with a full ring until the kill */
		size_t len = (size_t)info.tx_ring_size * 4 + (1u << 20);
		char *big = malloc(len);

		T_ASSERT(big != NULL);
		memset(big, 'k', len);
		r = sc_send(c, big, len, 0);
		t_ret = t_now_us();
		saw_reset |= r == -ECONNRESET;
		T_EQ(pthread_join(th, NULL), 0);
		T_ASSERTF(r == -ECONNRESET || r == -EPIPE || (r > 0 && (size_t)r < len),
			  "blocked sc_send(%zu) returned %zd%s after the peer was killed",
			  len, r, t_errname_(r));
		if (r > 0)
			T_ASSERTF((size_t)r >= info.tx_ring_size,
				  "partial send %zd is less than the ring (%u)", r,
				  info.tx_ring_size);
		r = sc_send(c, big, 10, 0);
		saw_reset |= r == -ECONNRESET;
		T_ASSERTF(r == -ECONNRESET || r == -EPIPE,
			  "sc_send after peer death returned %zd%s", r, t_errname_(r));
		r = sc_recv(c, buf, sizeof buf, 0);
		saw_reset |= r == -ECONNRESET;
		T_ASSERTF(r == -ECONNRESET || r == 0,
			  "sc_recv after peer death returned %zd%s", r, t_errname_(r));
		free(big);
	}
	T_ASSERTF(t_ret >= k.t_kill_us, "the wait ended %llu us before the kill",
		  (unsigned long long)(k.t_kill_us - t_ret));
	ms = (t_ret - k.t_kill_us) / 1000;
	t_log("kill:   detected after %llu ms (returned %zd)", (unsigned long long)ms, r);
	T_ASSERTF(ms <= DETECT_LIMIT_MS, "peer death noticed after %llu ms",
		  (unsigned long long)ms);
	/* the error state is sticky and reported without blocking */
	r = sc_recv(c, buf, sizeof buf, 0);
	saw_reset |= r == -ECONNRESET;
	T_ASSERTF(r == -ECONNRESET || r == 0, "sc_recv returned %zd%s", r, t_errname_(r));
	r = sc_send(c, buf, 1, 0);
	saw_reset |= r == -ECONNRESET;
	T_ASSERTF(r == -ECONNRESET || r == -EPIPE, "sc_send returned %zd%s", r,
		  t_errname_(r));
	if (saw_reset)
		n_reset_seen++;
	check_dead(v->pid);
	T_EQ(sc_close(c), 0);
}

/* the four cases at once: every victim forked before this process uses
 * the library, the stats and the fds counted over all of them */
T_TEST(recv_and_send)
{
	int fds0, maps0;
	char *shm0, *shm;
	char lpath[T_PATH_MAX];
	struct sc_listener *l = NULL;
	struct sc_stats st;

	t_seed();
	t_listen_path(lpath);
	for (int i = 0; i < NCASES; i++)
		victims[i].go_rd = victims[i].go_wr = -1;
	/* Fork every victim before the library is used in this process. */
	for (int i = 0; i < NCASES; i++) {
		int p[2];
		struct victim *v = &victims[i];

		T_EQ(pipe(p), 0);
		v->idx = i;
		v->accepts = i >= 2;
		v->go_rd = p[0];
		v->go_wr = p[1];
		if (v->accepts)
			t_listen_path(v->path);
		else
			strcpy(v->path, lpath);
		v->pid = t_fork(victim_main, v);
		close(v->go_rd);
		v->go_rd = -1;
	}
	shm0 = t_shm_list();
	fds0 = t_fd_count();
	maps0 = t_maps_count("memfd:");
	t_log("kill: before any connection: %d fds, %d memfd mappings", fds0, maps0);

	T_OK(sc_listen(lpath, 0, &l));
	run_case(&victims[0], l, 0);
	run_case(&victims[1], l, 1);
	run_case(&victims[2], NULL, 0);
	run_case(&victims[3], NULL, 1);
	sc_listener_close(l);

	sc_stats_get(&st);
	T_EQ(st.conns_opened, NCASES);
	/* a death that looks like a FIN (recv 0) need not count as an abort;
	 * one we saw as -ECONNRESET must.  The peer that died with our data
	 * unread (the send cases) reset the connection. */
	T_EQ(st.conns_aborted, n_reset_seen);
	T_ASSERT(n_reset_seen >= 2);

	t_log("kill: all closed -> fds and memfd mappings back to %d / %d, "
	      "no new /dev/shm entries", fds0, maps0);
	t_wait_fds_back(fds0, maps0, 10000, "after close");
	shm = t_shm_list();
	T_ASSERTF(strcmp(shm, shm0) == 0, "/dev/shm before:\n%s\nafter:\n%s", shm0, shm);
	free(shm);
	free(shm0);
	for (int i = 0; i < NCASES; i++)
		close(victims[i].go_wr);
}

T_MAIN(NULL, T_ENTRY(recv_and_send))
