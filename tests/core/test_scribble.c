/* SPDX-License-Identifier: MIT */
/*
 * A peer that scribbles the shared segment and then dies (or stays): the
 * victim, whatever the peer wrote, sees the end of each connection (EOF,
 * -ECONNRESET or -EPROTO) within a second of the death, and afterwards holds
 * no fd or mapping more than before.  A cell, a flag or a cursor written by
 * the peer is only ever a hint: the victim's own wake-up cells live in the
 * segment, so a peer that zeroes their armed token must not keep the
 * victim's waiters asleep through its death (issue 15: 78 of 300 rounds
 * hung), nor through a local event such as the victim's own SHUT_RD.
 *
 * Each round forks one attacker.  The victim (this process) waits in one
 * of four ways (blocking sc_recv, sc_send on a full ring, poll on
 * sc_conn_fd, sc_chan_wait on a shared channel); once its thread is asleep
 * the attacker scribbles (one of several patterns: the victim's cells'
 * tokens zeroed, cells random, its own flags FROZEN or random, everything
 * random) and kills itself.  Both roles: the attacker connected to us, or
 * accepted our connection.  SC_TEST_SEED replays a run.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "t_util.h"

/* a failure detector on a busy machine, not the goal (the worst time is
 * printed: the goal is well under a second) */
#define DETECT_LIMIT_MS 5000
#define HANG_GUARD_MS 10000

enum { W_RECV, W_SEND, W_POLL, W_CHAN, W_MAX };
static const char *wait_name[] = { "sc_recv", "sc_send (full ring)", "poll(sc_conn_fd)",
				   "sc_chan_wait (shared channel)" };
enum { S_ZERO_ARMED, S_CELLS_RANDOM, S_OWN_FROZEN, S_OWN_RANDOM, S_ALL_RANDOM, S_MAX };
static const char *scribble_name[] = { "our cells' tokens zeroed", "our cells random",
				       "its flags FROZEN", "its side random",
				       "cells and slot random" };

struct round {
	int accepts;            /* 1: the attacker listens, we connect */
	int how;                /* S_* */
	uint64_t seed;
	char path[T_PATH_MAX];
	int go[2];              /* socketpair: the parent says scribble, then die
				 * or stay; a staying attacker answers once done */
};

/* Everything the victim can see of the attacker's doing, random. */
static void scribble(struct sc_conn *c, int how, uint64_t seed)
{
	struct sc_group *g = c->g;
	struct t_rng r;

	t_rng_seed(&r, seed);
	switch (how) {
	case S_ZERO_ARMED:
		for (int i = 0; i < SC_MAX_CELLS; i++)
			atomic_store(&g->peer_cells[i].armed, 0);
		break;
	case S_CELLS_RANDOM:
		for (int i = 0; i < SC_MAX_CELLS; i++) {
			struct sc_cell *cl = &g->peer_cells[i];
			atomic_store(&cl->armed, (uint32_t)t_rng_next(&r));
			atomic_store(&cl->wake_seq, (uint32_t)t_rng_next(&r));
			atomic_store(&cl->futex_waiters, (uint32_t)t_rng_next(&r));
			atomic_store(&cl->wake_gen, (uint32_t)t_rng_next(&r));
			for (int w = 0; w < 4; w++)
				atomic_store(&cl->ready[w], t_rng_next(&r) & t_rng_next(&r));
		}
		break;
	case S_OWN_FROZEN:
		for (int i = 0; i < SC_MAX_CELLS; i++)
			atomic_store(&g->peer_cells[i].armed, 0);
		atomic_fetch_or(&c->me->flags, SC_SF_FROZEN);
		break;
	case S_OWN_RANDOM: {
		uint64_t *p = (uint64_t *)c->me;
		for (size_t i = 0; i < sizeof(*c->me) / 8; i++)
			p[i] = t_rng_next(&r);
		break;
	}
	case S_ALL_RANDOM: {
		/* the cells and every slot, a random word here and there, then
		 * every token of ours zeroed */
		uint64_t *p = (uint64_t *)(g->base + SC_CELLS_OFF);
		size_t n = (g->data_off - SC_CELLS_OFF) / 8;
		for (int k = 0; k < 20000; k++)
			p[t_rng_below(&r, n)] = t_rng_next(&r) >> t_rng_below(&r, 64);
		for (int i = 0; i < SC_MAX_CELLS; i++)
			atomic_store(&g->peer_cells[i].armed, 0);
		break;
	}
	}
}

/* The attacker, exec'd afresh (this process's library state must not be
 * inherited): argv = attacker PATH ACCEPTS HOW SEED GO_FD */
static int attacker(char **argv)
{
	struct round rd = { .accepts = atoi(argv[3]), .how = atoi(argv[4]),
			    .seed = strtoull(argv[5], NULL, 0) };
	int go_fd = atoi(argv[6]);
	struct sc_listener *l = NULL;
	struct sc_conn *c;
	char hello[8] = "hello!!", go;

	/* die with the test */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (rd.accepts) {
		T_OK(sc_listen(argv[2], 0, &l));
		T_OK(sc_accept(l, &c, 0));
	} else {
		c = t_connect_retry(argv[2], 0, 5000);
	}
	t_send_all(c, hello, sizeof hello);
	t_read_full(go_fd, &go, 1);
	scribble(c, rd.how, rd.seed);
	if (go == 'k')
		raise(SIGKILL);
	t_write_full(go_fd, &go, 1);
	/* 's': stay alive, scribbled, until the parent kills us */
	for (;;)
		pause();
	return 1;
}

static pid_t spawn_attacker(struct round *rd)
{
	char acc[8], how[8], seed[32], fd[8];
	pid_t pid;

	snprintf(acc, sizeof acc, "%d", rd->accepts);
	snprintf(how, sizeof how, "%d", rd->how);
	snprintf(seed, sizeof seed, "%llu", (unsigned long long)rd->seed);
	snprintf(fd, sizeof fd, "%d", rd->go[0]);
	fflush(NULL);
	pid = fork();
	T_ASSERT(pid >= 0);
	if (pid == 0) {
		close(rd->go[1]);
		execl("/proc/self/exe", "test_scribble", "attacker", rd->path, acc, how, seed,
		      fd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

struct killer {
	struct round *rd;
	pid_t pid, waiter;
	char mode;              /* 'k': the attacker dies; 's': it stays, we SHUT_RD */
	struct sc_conn *c;
	uint64_t t_dead_us;
};

static void *killer_main(void *p)
{
	struct killer *k = p;
	int st;

	t_wait_asleep(getpid(), k->waiter, HANG_GUARD_MS, "scribble: our thread in its wait");
	t_write_full(k->rd->go[1], &k->mode, 1);
	if (k->mode == 'k') {
		T_EQ(waitpid(k->pid, &st, 0), k->pid);
		k->t_dead_us = t_now_us();
		T_ASSERTF(WIFSIGNALED(st), "attacker %s", t_status_str(st));
	} else {
		/* the attacker scribbled and stays: once it says it is done,
		 * our own shutdown must wake our own waiter, whatever the
		 * tokens say */
		char done;
		t_read_full(k->rd->go[1], &done, 1);
		k->t_dead_us = t_now_us();
		sc_shutdown(k->c, SHUT_RDWR);
	}
	return NULL;
}

/* Wait the chosen way until the connection ends; its last result. */
static long victim_wait(struct sc_conn *c, int how, struct sc_chan *ch)
{
	char buf[256];
	long r;

	switch (how) {
	case W_RECV:
		/* (bytes the peer's scribbled cursor published: garbage, read on) */
		while ((r = sc_recv(c, buf, sizeof buf, 0)) > 0)
			;
		return r;
	case W_SEND: {
		struct sc_conn_info info;
		sc_conn_info(c, &info);
		size_t len = (size_t)info.tx_ring_size * 2;
		char *big = calloc(1, len);
		T_ASSERT(big);
		r = sc_send(c, big, len, 0);
		free(big);
		if (r >= 0)     /* a partial send: the next says why */
			r = sc_send(c, buf, 1, 0);
		return r;
	}
	case W_POLL: {
		int fd = T_OK(sc_conn_fd(c));
		for (;;) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			T_OK(poll(&p, 1, -1));
			while ((r = sc_recv(c, buf, sizeof buf, SC_NONBLOCK)) > 0)
				;
			if (r != -EAGAIN)
				return r;
		}
	}
	case W_CHAN: {
		struct sc_conn *out[4];
		T_OK(sc_chan_bind(c, ch));
		for (;;) {
			/* the channel reports changes: read until it is empty
			 * (bytes a scribbled cursor published come first) */
			while ((r = sc_recv(c, buf, sizeof buf, SC_NONBLOCK)) > 0)
				;
			if (r != -EAGAIN)
				return r;
			T_OK(sc_chan_wait(ch, out, 4, -1));
		}
	}
	}
	return -EINVAL;
}

T_TEST(attacks)
{
	uint64_t seed = t_seed();
	int rounds = (int)t_scale(2 * W_MAX * S_MAX, 2 * W_MAX * S_MAX);
	char lpath[T_PATH_MAX];
	struct sc_listener *l = NULL;
	struct sc_chan *ch = NULL;
	uint64_t worst_ms = 0;
	int fds0, maps0;
	struct t_rng rng;

	t_rng_seed(&rng, seed);
	t_listen_path(lpath);
	fds0 = t_fd_count();
	maps0 = t_maps_count("memfd:");
	T_OK(sc_listen(lpath, 0, &l));
	T_OK(sc_chan_open(&ch));
	for (int i = 0; i < rounds; i++) {
		struct round rd = { .accepts = i & 1, .how = (i / 2) % S_MAX,
				    .seed = t_rng_next(&rng) };
		int wait_how = (i / (2 * S_MAX)) % W_MAX;
		/* one round in four the attacker stays: our own shutdown must
		 * still wake us */
		char mode = t_rng_below(&rng, 4) || wait_how == W_SEND ? 'k' : 's';
		struct sc_conn *c;
		char hello[8];

		if (rd.accepts)
			t_listen_path(rd.path);
		else
			strcpy(rd.path, lpath);
		if (getenv("SC_TEST_VERBOSE"))
			t_log("round %d: attacker %s, we wait in %s, %s, then it %s", i,
			      rd.accepts ? "accepts" : "connects", wait_name[wait_how],
			      scribble_name[rd.how], mode == 'k' ? "dies" : "stays");
		T_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, rd.go), 0);
		pid_t pid = spawn_attacker(&rd);
		close(rd.go[0]);
		if (rd.accepts)
			c = t_connect_retry(rd.path, 0, 5000);
		else
			T_OK(sc_accept(l, &c, 0));
		t_recv_all(c, hello, sizeof hello);

		struct killer k = { &rd, pid, (pid_t)gettid(), mode, c, 0 };
		pthread_t th;
		struct sc_stats st0, st1;
		sc_stats_get(&st0);
		T_EQ(pthread_create(&th, NULL, killer_main, &k), 0);
		long r = victim_wait(c, wait_how, ch);
		uint64_t t_ret = t_now_us();
		T_EQ(pthread_join(th, NULL), 0);
		uint64_t ms = t_ret > k.t_dead_us ? (t_ret - k.t_dead_us) / 1000 : 0;
		if (ms > worst_ms)
			worst_ms = ms;
		T_ASSERTF(r == 0 || r == -ECONNRESET || r == -EPROTO || r == -EPIPE,
			  "round %d (%s, %s, attacker %s): the wait returned %ld%s", i,
			  wait_name[wait_how], scribble_name[rd.how],
			  mode == 'k' ? "killed" : "stays", r, t_errname_(r));
		T_ASSERTF(ms <= DETECT_LIMIT_MS, "round %d (%s, %s): the end seen after %llu ms",
			  i, wait_name[wait_how], scribble_name[rd.how], (unsigned long long)ms);
		T_EQ(sc_close(c), 0);
		sc_stats_get(&st1);
		/* an end by reset or violation is counted as one */
		if (r == -ECONNRESET || r == -EPROTO)
			T_ASSERTF(st1.conns_aborted + st1.proto_errors >
				  st0.conns_aborted + st0.proto_errors,
				  "round %d: the end (%ld) not counted", i, r);
		if (mode == 's') {
			kill(pid, SIGKILL);
			t_wait_status(pid);
		}
		close(rd.go[1]);
	}
	t_log("scribble: %d rounds, worst time to see the end %llu ms", rounds,
	      (unsigned long long)worst_ms);
	sc_chan_close(ch);
	sc_listener_close(l);
	/* everything the attacked connections held goes (the control thread
	 * frees dead groups as soon as it can: a hang guard, not a deadline) */
	t_wait_fds_back(fds0, maps0, HANG_GUARD_MS, "after the rounds");
}

static const struct t_test tests[] = {
	T_ENTRY(attacks),
	{ NULL, NULL }
};

int main(int argc, char **argv)
{
	/* an attacker: this program run again by spawn_attacker */
	if (argc == 7 && !strcmp(argv[1], "attacker"))
		return attacker(argv);
	return t_main(argc, argv, NULL, tests);
}
