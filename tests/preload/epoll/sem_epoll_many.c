/* SPDX-License-Identifier: MIT */
/* 1000 connections open at once (RLIMIT_NOFILE raised), random traffic
 * both ways and closes from both sides, every fd of each side in one epoll
 * set.  The client connects them all nonblocking (EPOLLET set); connection
 * i sends its id and a random number of bytes (0-20000, fixed seed) and
 * receives another; then, by i: the client closes (the server must see
 * EOF and EPOLLRDHUP), the server closes (the client must see them), or
 * both shut down their sending side and close after EOF.  The server's set
 * (level-triggered, EPOLLOUT asked by MOD only while it has bytes to send,
 * listener included) reads and writes in random pieces.  Every byte is
 * checked and every close counted on both sides. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

#define N 1000
#define MAXB 20000
#define LTAG UINT64_MAX

enum { CLIENT_CLOSES, SERVER_CLOSES, BOTH_SHUT };

struct plan {
	uint32_t c2s, s2c;
	int mode;
};

static struct plan plan_of(uint32_t id)
{
	uint64_t x = 0x243f6a8885a308d3ull ^ (id * 0x9e3779b97f4a7c15ull);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	struct plan p = { (uint32_t)(x % MAXB), (uint32_t)((x >> 20) % MAXB), (int)((x >> 40) % 3) };
	if ((x >> 50) % 10 == 0)
		p.c2s = 0;                      /* some send nothing */
	if ((x >> 54) % 10 == 0)
		p.s2c = 0;
	return p;
}

static uint64_t rng = 0x1234567887654321ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		fatal("getrlimit");
	rlim_t want = 4 * N;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			fatal("setrlimit");
	}
	if (rl.rlim_cur < N + 200)
		fatal("RLIMIT_NOFILE too low (%llu)", (unsigned long long)rl.rlim_cur);
}

/* does buf (n bytes at offset off of the stream made with seed) match? */
static bool matches(const unsigned char *buf, size_t n, uint64_t off, unsigned seed)
{
	unsigned char exp[8192];
	while (n) {
		size_t k = n < sizeof(exp) ? n : sizeof(exp);
		pattern(exp, k, off, seed);
		if (memcmp(exp, buf, k))
			return false;
		buf += k;
		n -= k;
		off += k;
	}
	return true;
}

/* ---- server ---------------------------------------------------------------- */

struct sc {
	int fd;
	unsigned char idb[4];
	unsigned idn;
	uint32_t id;
	struct plan p;
	uint32_t got, sent;
	bool intact, eof, rdhup, shut, closed, want_out;
};

static int sep;

static void s_events(struct sc *c, uint64_t tag)
{
	bool want = c->idn == 4 && c->sent < c->p.s2c;
	if (want == c->want_out)
		return;
	struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0), .data.u64 = tag };
	if (epoll_ctl(sep, EPOLL_CTL_MOD, c->fd, &e) < 0)
		fatal("epoll_ctl MOD");
	c->want_out = want;
}

static void server(int lfd)
{
	static struct sc cs[N];
	static struct epoll_event ev[64];
	static unsigned char buf[8192];
	int nc = 0, nclosed = 0;

	raise_nofile();
	if (listen(lfd, 2 * N) < 0 || fcntl(lfd, F_SETFL, O_NONBLOCK) < 0)
		fatal("listen");
	sep = epoll_create1(0);
	struct epoll_event le = { .events = EPOLLIN, .data.u64 = LTAG };
	if (sep < 0 || epoll_ctl(sep, EPOLL_CTL_ADD, lfd, &le) < 0)
		fatal("epoll");
	tell();
	while (nclosed < N) {
		int n = epoll_wait(sep, ev, 64, 5000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fatal("epoll_wait");
		if (n == 0) {
			int noid = 0, open = 0;
			for (int i = 0; i < nc; i++) {
				if (cs[i].closed)
					continue;
				open++;
				if (cs[i].idn < 4)
					noid++;
				else if (open < 20)
					fprintf(stderr, "server: id %u mode %d got %u/%u sent %u/%u eof %d "
						"rdhup %d shut %d\n", cs[i].id, cs[i].p.mode, cs[i].got,
						cs[i].p.c2s, cs[i].sent, cs[i].p.s2c, cs[i].eof,
						cs[i].rdhup, cs[i].shut);
			}
			fatal("server: nothing for 5 s: accepted %d, closed %d, open %d (%d without id)",
			      nc, nclosed, open, noid);
		}
		for (int i = 0; i < n; i++) {
			uint64_t tag = ev[i].data.u64;
			if (tag == LTAG) {
				for (;;) {
					int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
					if (fd < 0 && errno == EAGAIN)
						break;
					if (fd < 0)
						fatal("accept4");
					if (nc == N)
						fatal("more than %d connections", N);
					struct sc *c = &cs[nc];
					c->fd = fd;
					c->intact = true;
					struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP,
								 .data.u64 = (uint64_t)nc };
					if (epoll_ctl(sep, EPOLL_CTL_ADD, fd, &e) < 0)
						fatal("epoll_ctl ADD");
					nc++;
				}
				continue;
			}
			struct sc *c = &cs[tag];
			uint32_t e = ev[i].events;
			if (c->closed)
				fatal("event for a closed connection");
			if (e & EPOLLRDHUP)
				c->rdhup = true;
			if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && !c->eof) {
				size_t want = 1 + rnd() % sizeof(buf);
				if (c->idn < 4)
					want = 4 - c->idn;
				ssize_t r = recv(c->fd, buf, want, 0);
				if (r < 0 && errno != EAGAIN)
					fatal("server recv");
				if (r == 0) {
					c->eof = true;
					if (c->idn < 4 || c->got != c->p.c2s)
						c->intact = false;
				} else if (r > 0 && c->idn < 4) {
					memcpy(c->idb + c->idn, buf, (size_t)r);
					c->idn += (unsigned)r;
					if (c->idn == 4) {
						memcpy(&c->id, c->idb, 4);
						c->p = plan_of(c->id);
					}
				} else if (r > 0) {
					if (c->got + (uint32_t)r > c->p.c2s ||
					    !matches(buf, (size_t)r, c->got, c->id))
						c->intact = false;
					c->got += (uint32_t)r;
				}
			}
			if ((e & EPOLLOUT) && c->idn == 4 && c->sent < c->p.s2c) {
				size_t k = 1 + rnd() % sizeof(buf);
				if (k > c->p.s2c - c->sent)
					k = c->p.s2c - c->sent;
				pattern(buf, k, c->sent, c->id + 5000);
				ssize_t w = send(c->fd, buf, k, MSG_NOSIGNAL);
				if (w < 0 && errno != EAGAIN)
					fatal("server send (id %u)", c->id);
				if (w > 0)
					c->sent += (uint32_t)w;
			}
			if (c->idn == 4)
				s_events(c, tag);
			bool all = c->idn == 4 && c->got == c->p.c2s && c->sent == c->p.s2c;
			bool close_now = false;
			if (all && c->p.mode == SERVER_CLOSES)
				close_now = true;
			if (all && c->p.mode == BOTH_SHUT && !c->shut) {
				if (shutdown(c->fd, SHUT_WR) < 0)
					fatal("shutdown");
				c->shut = true;
			}
			if (c->eof && c->rdhup && (c->p.mode != BOTH_SHUT || c->shut))
				close_now = true;
			if (c->eof && !c->rdhup && (e & EPOLLRDHUP))
				c->rdhup = true;
			if (close_now) {
				if (close(c->fd) < 0)
					fatal("close");
				c->closed = true;
				nclosed++;
			}
		}
	}
	static bool seen[N];
	int dup = 0, intact = 0, cc = 0, sc = 0, bs = 0, eof_rdhup = 0;
	uint64_t in = 0, out = 0;
	for (int i = 0; i < nc; i++) {
		struct sc *c = &cs[i];
		if (c->id >= N || seen[c->id])
			dup++;
		else
			seen[c->id] = true;
		if (c->intact && c->got == c->p.c2s)
			intact++;
		in += c->got;
		out += c->sent;
		cc += c->p.mode == CLIENT_CLOSES;
		sc += c->p.mode == SERVER_CLOSES;
		bs += c->p.mode == BOTH_SHUT;
		if (c->p.mode != SERVER_CLOSES && c->eof && c->rdhup)
			eof_rdhup++;
	}
	say("accepted %d connections, ids unknown or twice: %d", nc, dup);
	say("received intact: %d (%llu bytes), sent %llu bytes", intact, (unsigned long long)in,
	    (unsigned long long)out);
	say("client closes %d, server closes %d, both shut down %d", cc, sc, bs);
	say("EOF and EPOLLRDHUP seen before closing: %d", eof_rdhup);
	close(sep);
}

/* ---- client ---------------------------------------------------------------- */

struct cc {
	int fd;
	struct plan p;
	uint32_t sent, got;     /* sent counts the id too */
	bool connected, rd, wr, intact, eof, rdhup, shut, closed, err;
};

static void client(void)
{
	static struct cc cs[N];
	static struct epoll_event ev[64];
	static unsigned char buf[8192];
	struct sockaddr_in a = t_addr();
	int nclosed = 0;

	raise_nofile();
	int ep = epoll_create1(0);
	if (ep < 0)
		fatal("epoll_create1");
	await_peer();
	for (uint32_t i = 0; i < N; i++) {
		struct cc *c = &cs[i];
		c->p = plan_of(i);
		c->intact = true;
		c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (c->fd < 0)
			fatal("socket %u", i);
		if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
			fatal("connect %u", i);
		struct epoll_event e = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
					 .data.u64 = i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0)
			fatal("epoll_ctl ADD");
	}
	while (nclosed < N) {
		bool busy = false;
		for (int i = 0; i < N && !busy; i++) {
			struct cc *c = &cs[i];
			busy = !c->closed && ((c->rd && !c->eof) ||
					      (c->connected && c->wr && c->sent < 4 + c->p.c2s));
		}
		int n = epoll_wait(ep, ev, 64, busy ? 0 : 5000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fatal("epoll_wait");
		if (n == 0 && !busy) {
			int open = 0;
			for (int i = 0; i < N; i++)
				if (!cs[i].closed && open++ < 20)
					fprintf(stderr, "client: %d mode %d conn %d sent %u/%u got %u/%u "
						"eof %d rdhup %d rd %d wr %d\n", i, cs[i].p.mode,
						cs[i].connected, cs[i].sent, 4 + cs[i].p.c2s, cs[i].got,
						cs[i].p.s2c, cs[i].eof, cs[i].rdhup, cs[i].rd, cs[i].wr);
			fatal("client: nothing for 5 s, %d closed", nclosed);
		}
		for (int i = 0; i < n; i++) {
			struct cc *c = &cs[ev[i].data.u64];
			uint32_t e = ev[i].events;
			if (c->closed)
				fatal("event for a closed connection");
			if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				c->rd = true;
			if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
				c->wr = true;
			if (e & EPOLLRDHUP)
				c->rdhup = true;
			if (!c->connected && (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
				int err = 0;
				socklen_t l = sizeof(err);
				getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
				c->err |= err != 0;
				c->connected = true;
			}
		}
		/* one piece each way per connection and round: interleaved */
		for (uint32_t i = 0; i < N; i++) {
			struct cc *c = &cs[i];
			if (c->closed)
				continue;
			if (c->connected && c->wr && c->sent < 4 + c->p.c2s) {
				size_t k = 1 + rnd() % sizeof(buf);
				if (c->sent == 0) {
					memcpy(buf, &i, 4);
					k = 4;
				} else {
					if (k > 4 + c->p.c2s - c->sent)
						k = 4 + c->p.c2s - c->sent;
					pattern(buf, k, c->sent - 4, i);
				}
				ssize_t w = send(c->fd, buf, k, MSG_NOSIGNAL);
				if (w < 0 && errno == EAGAIN)
					c->wr = false;
				else if (w < 0)
					fatal("client send %u", i);
				else
					c->sent += (uint32_t)w;
			}
			if (c->rd && !c->eof) {
				size_t k = 1 + rnd() % sizeof(buf);
				ssize_t r = recv(c->fd, buf, k, 0);
				if (r < 0 && errno == EAGAIN)
					c->rd = false;
				else if (r < 0)
					fatal("client recv %u", i);
				else if (r == 0) {
					c->eof = true;
					if (c->got != c->p.s2c)
						c->intact = false;
				} else {
					if (c->got + (uint32_t)r > c->p.s2c ||
					    !matches(buf, (size_t)r, c->got, i + 5000))
						c->intact = false;
					c->got += (uint32_t)r;
				}
			}
			bool all = c->sent == 4 + c->p.c2s && c->got == c->p.s2c;
			bool close_now = false;
			if (all && c->p.mode == CLIENT_CLOSES)
				close_now = true;
			if (all && c->p.mode == BOTH_SHUT && !c->shut) {
				if (shutdown(c->fd, SHUT_WR) < 0)
					fatal("shutdown");
				c->shut = true;
			}
			if (c->eof && c->rdhup && (c->p.mode != BOTH_SHUT || c->shut))
				close_now = true;
			if (close_now) {
				if (close(c->fd) < 0)
					fatal("close");
				c->closed = true;
				nclosed++;
			}
		}
	}
	int intact = 0, errs = 0, eof_rdhup = 0, conn = 0;
	uint64_t in = 0, out = 0;
	for (int i = 0; i < N; i++) {
		struct cc *c = &cs[i];
		conn += c->connected;
		errs += c->err;
		if (c->intact && c->got == c->p.s2c)
			intact++;
		in += c->got;
		out += c->sent - 4;
		if (c->p.mode != CLIENT_CLOSES && c->eof && c->rdhup)
			eof_rdhup++;
	}
	say("connected %d, connect errors %d", conn, errs);
	say("received intact: %d (%llu bytes), sent %llu bytes", intact, (unsigned long long)in,
	    (unsigned long long)out);
	say("EOF and EPOLLRDHUP seen before closing: %d", eof_rdhup);
	close(ep);
}

int main(void)
{
	return run(server, client);
}
