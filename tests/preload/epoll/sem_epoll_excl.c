/* SPDX-License-Identifier: MIT */
/* EPOLLEXCLUSIVE as nginx uses it: several workers, each with its own epoll
 * set holding the same (nonblocking) listening socket with
 * EPOLLIN|EPOLLEXCLUSIVE, accept one connection per event and serve it in
 * their set.  First 3 forked worker processes, then 3 threads of one
 * process; the client opens 60 connections at once and exchanges 5 rounds
 * of random-sized messages on each.  Only what is certain is printed:
 * every connection accepted exactly once, every byte echoed intact, every
 * close seen.  Then an accelerated connection in two sets with
 * EPOLLEXCLUSIVE: with nobody sleeping both report it, a sleeping waiter
 * is woken (the data comes once the waiters' state says they sleep).
 * (epoll_ctl's rules for EPOLLEXCLUSIVE: sem_epoll_excl_ctl.c.) */
#include "epoll_common.h"
#include <pthread.h>
#include <stdatomic.h>

#define M 60
#define ROUNDS 5
#define WORKERS 3
#define LTAG UINT64_MAX
#define CTAG (UINT64_MAX - 1)

static size_t msg_len(uint32_t id, int round)
{
	uint64_t x = (id + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(round + 1) * 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 32;
	return 1 + x % 4000;
}

static size_t total_len(uint32_t id)
{
	size_t t = 0;
	for (int r = 0; r < ROUNDS; r++)
		t += msg_len(id, r);
	return t;
}

/* what a worker learnt about one connection */
struct rec {
	uint32_t id;
	uint32_t bytes;         /* after the id */
	uint64_t h;
	uint32_t eof;
};

/* ---- a worker: its own set, the listener with EPOLLEXCLUSIVE -------------- */

struct wconn {
	int fd;
	unsigned idn;
	struct rec r;
};

static int lfd_g;

/* serves until the control fd is readable; returns the records */
static int work(int ctlfd, struct rec *out, int max)
{
	struct wconn cs[M];
	int nc = 0, nrec = 0;
	struct epoll_event ev[16];
	static __thread char buf[65536];

	int ep = epoll_create1(0);
	struct epoll_event le = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = LTAG };
	struct epoll_event ce = { .events = EPOLLIN, .data.u64 = CTAG };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd_g, &le) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, ctlfd, &ce) < 0)
		fatal("worker: epoll");
	for (;;) {
		int n = epoll_wait(ep, ev, 16, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fatal("worker: epoll_wait");
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			if (tag == CTAG) {
				fprintf(stderr, "a worker accepted %d connections\n", nc);
				for (int k = 0; k < nc; k++)
					if (cs[k].fd >= 0) {
						close(cs[k].fd);
						if (nrec < max)
							out[nrec++] = cs[k].r;
					}
				close(ep);
				return nrec;
			}
			if (tag == LTAG) {
				int fd = accept4(lfd_g, NULL, NULL, SOCK_NONBLOCK);
				if (fd < 0 && errno == EAGAIN)
					continue;       /* another worker took it */
				if (fd < 0)
					fatal("worker: accept4");
				if (nc == M)
					fatal("worker: too many connections");
				cs[nc] = (struct wconn){ .fd = fd, .r = { .h = CK_INIT } };
				struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = (uint64_t)nc };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
					fatal("worker: epoll_ctl ADD");
				nc++;
				continue;
			}
			struct wconn *c = &cs[tag];
			for (;;) {
				ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
				if (r < 0 && errno == EAGAIN)
					break;
				if (r < 0)
					fatal("worker: recv");
				if (r == 0) {
					c->r.eof = 1;
					close(c->fd);
					c->fd = -1;
					if (nrec < max)
						out[nrec++] = c->r;
					break;
				}
				size_t off = 0;
				while (c->idn < 4 && off < (size_t)r) {
					c->r.id |= (uint32_t)(unsigned char)buf[off++] << (8 * c->idn);
					c->idn++;
				}
				c->r.h = ck(c->r.h, buf + off, (size_t)r - off);
				c->r.bytes += (uint32_t)((size_t)r - off);
				if (send_all(c->fd, buf, (size_t)r) != r)
					fatal("worker: send");
			}
		}
	}
}

static void check(const char *who, struct rec *recs, int n, int workers_ok)
{
	int seen[M] = { 0 }, bad = 0, intact = 0, eofs = 0;
	for (int i = 0; i < n; i++) {
		if (recs[i].id >= M) {
			bad++;
			continue;
		}
		seen[recs[i].id]++;
		size_t t = total_len(recs[i].id);
		if (recs[i].bytes == t && recs[i].h == pattern_ck(t, recs[i].id))
			intact++;
		eofs += recs[i].eof != 0;
	}
	int once = 0;
	for (int i = 0; i < M; i++)
		once += seen[i] == 1;
	say("%s: %d connections served, each accepted exactly once: %s", who, n,
	    yesno(once == M && n == M && !bad));
	say("%s: received intact %d, EOF seen %d, workers ended cleanly: %s", who, intact, eofs,
	    yesno(workers_ok));
}

/* ---- processes ---------------------------------------------------------------- */

static void processes(void)
{
	int rp[2], cp[WORKERS][2];
	pid_t pids[WORKERS];
	if (pipe(rp) < 0)
		fatal("pipe");
	for (int w = 0; w < WORKERS; w++) {
		if (pipe(cp[w]) < 0)
			fatal("pipe");
		pids[w] = t_fork();
		if (pids[w] == 0) {
			t_pid = 0;
			signal(SIGALRM, SIG_DFL);
			alarm(20);
			close(rp[0]);
			static struct rec recs[M];
			int n = work(cp[w][0], recs, M);
			ssize_t want = (ssize_t)(sizeof(recs[0]) * (size_t)n);
			_exit(write(rp[1], recs, (size_t)want) == want ? 0 : 1);
		}
		close(cp[w][0]);
	}
	close(rp[1]);
	tell();                                 /* client: go */
	await_peer();                           /* client: done */
	for (int w = 0; w < WORKERS; w++)
		if (write(cp[w][1], "q", 1) != 1)
			fatal("write");
	static struct rec recs[WORKERS * M];
	size_t got = 0;
	ssize_t r;
	while ((r = read(rp[0], (char *)recs + got, sizeof(recs) - got)) > 0)
		got += (size_t)r;
	close(rp[0]);
	bool ok = true;
	for (int w = 0; w < WORKERS; w++) {
		int st;
		waitpid(pids[w], &st, 0);
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
		close(cp[w][1]);
	}
	check("worker processes", recs, (int)(got / sizeof(recs[0])), ok);
}

/* ---- threads ------------------------------------------------------------------ */

struct wt {
	pthread_t t;
	int ctl[2];
	struct rec recs[M];
	int n;
};

static void *thread_main(void *arg)
{
	struct wt *w = arg;
	w->n = work(w->ctl[0], w->recs, M);
	return NULL;
}

static void threads(void)
{
	static struct wt ws[WORKERS];
	for (int w = 0; w < WORKERS; w++) {
		if (pipe(ws[w].ctl) < 0 || pthread_create(&ws[w].t, NULL, thread_main, &ws[w]))
			fatal("pipe/pthread_create");
	}
	tell();
	await_peer();
	static struct rec recs[WORKERS * M];
	int n = 0;
	for (int w = 0; w < WORKERS; w++) {
		if (write(ws[w].ctl[1], "q", 1) != 1)
			fatal("write");
		pthread_join(ws[w].t, NULL);
		memcpy(recs + n, ws[w].recs, sizeof(recs[0]) * (size_t)ws[w].n);
		n += ws[w].n;
		close(ws[w].ctl[0]);
		close(ws[w].ctl[1]);
	}
	check("worker threads", recs, n, true);
}

/* ---- epoll_ctl rules, two sets ------------------------------------------------- */

static int ep1;

struct sl {
	pthread_t t;
	_Atomic pid_t tid;
	int ep, n;
};

static void *sleep_in(void *arg)
{
	struct sl *s = arg;
	struct epoll_event ev[4];
	atomic_store(&s->tid, gettid());
	s->n = epoll_wait(s->ep, ev, 4, 2000);
	return NULL;
}

/* until the thread is asleep in its epoll_wait (its state, not a time) */
static void wait_sl_asleep(struct sl *s)
{
	long t0 = t_now_ms();
	while (!atomic_load(&s->tid)) {
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("the thread did not start");
		msleep(1);
	}
	wait_thread_asleep(atomic_load(&s->tid));
}

static void two_sets(int lfd)
{
	if (fcntl(lfd, F_SETFL, 0) < 0)
		fatal("fcntl");
	tell();
	int fd = server_conn(lfd);
	char buf[64];
	ep1 = epoll_create1(0);
	int ep2 = epoll_create1(0);
	ctl("set 1: ADD IN|EXCLUSIVE", ep1, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLEXCLUSIVE, 1);
	ctl("set 2: ADD IN|ET|EXCLUSIVE", ep2, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET | EPOLLEXCLUSIVE, 2);
	wait_report(ep1, "set 1, idle", 100);
	tell_u64(3);                            /* client: send 3 */
	await_peer();
	wait_report(ep1, "set 1, nobody was sleeping", 1000);
	wait_report(ep2, "set 2, nobody was sleeping", 1000);
	wait_report(ep2, "set 2, no new edge", 100);
	if (recv(fd, buf, sizeof(buf), 0) != 3)
		fatal("recv");
	wait_report(ep1, "set 1, drained", 100);

	struct sl a = { .ep = ep1 }, b = { .ep = ep2 };
	pthread_create(&a.t, NULL, sleep_in, &a);
	pthread_create(&b.t, NULL, sleep_in, &b);
	wait_sl_asleep(&a);                     /* both asleep in their sets */
	wait_sl_asleep(&b);
	tell_u64(4);                            /* client: send 4 */
	await_peer();
	pthread_join(a.t, NULL);
	pthread_join(b.t, NULL);
	say("two threads sleeping in the two sets, 4 bytes came: one woken at least: %s",
	    yesno(a.n == 1 || b.n == 1));
	if (recv(fd, buf, sizeof(buf), 0) != 4)
		fatal("recv");
	atomic_store(&a.tid, 0);
	pthread_create(&a.t, NULL, sleep_in, &a);
	wait_sl_asleep(&a);
	tell_u64(5);
	await_peer();
	pthread_join(a.t, NULL);
	say("one thread sleeping in set 1, 5 bytes came: woken: %s", yesno(a.n == 1));
	tell_u64(0);
	close(ep1);
	close(ep2);
	res("close", close(fd));
}

static void server(int lfd)
{
	if (listen(lfd, 256) < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0)
		fatal("listen");
	lfd_g = lfd;
	processes();
	threads();
	two_sets(lfd);
}

/* ---- the client ------------------------------------------------------------- */

static void one_run(const char *who)
{
	int fds[M];
	static char out[4096], in[4096];
	size_t off[M] = { 0 };
	int intact = 0, eofs = 0;

	await_peer();
	for (uint32_t i = 0; i < M; i++) {
		fds[i] = raw_connect();
		if (send_all(fds[i], &i, 4) != 4 || recv_all(fds[i], in, 4) != 4 || memcmp(in, &i, 4))
			fatal("id %u", i);
	}
	bool ok[M];
	for (int i = 0; i < M; i++)
		ok[i] = true;
	for (int r = 0; r < ROUNDS; r++) {
		for (uint32_t i = 0; i < M; i++) {
			size_t n = msg_len(i, r);
			pattern(out, n, off[i], i);
			if (send_all(fds[i], out, n) != (ssize_t)n)
				fatal("send");
		}
		for (uint32_t i = 0; i < M; i++) {
			size_t n = msg_len(i, r);
			pattern(out, n, off[i], i);
			if (recv_all(fds[i], in, n) != (ssize_t)n || memcmp(in, out, n))
				ok[i] = false;
			off[i] += n;
		}
	}
	for (int i = 0; i < M; i++) {
		char c;
		shutdown(fds[i], SHUT_WR);
		eofs += recv(fds[i], &c, 1, 0) == 0;
		close(fds[i]);
		intact += ok[i];
	}
	say("%s: %d connections, echoes intact %d, EOF from the server %d", who, M, intact, eofs);
	tell();
}

static void client(void)
{
	one_run("worker processes");
	one_run("worker threads");
	await_peer();
	int fd = client_conn();
	char buf[8];
	memset(buf, 'x', sizeof(buf));
	for (;;) {
		uint64_t n = await_u64();
		if (!n)
			break;
		if (send(fd, buf, n, 0) != (ssize_t)n)
			fatal("send");
		tell();
	}
	close(fd);
}

int main(void)
{
	return run(server, client);
}
