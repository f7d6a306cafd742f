/* SPDX-License-Identifier: MIT */
/* The peer of a connection switched back to TCP is an epoll event loop: the
 * server echoes everything it reads on two connections (nonblocking, read
 * until EAGAIN, write until EAGAIN, the rest kept and written when the set
 * reports EPOLLOUT), connection 1 registered level-triggered, connection 2
 * with EPOLLET.  The client exchanges a few messages on each, leaves echoes
 * in flight on both (on 1 it read only part of the last echo, on 2 none of
 * it) and exec()s python3 without the library with both fds.  Python reads
 * the pending echoes, sends about 200 KB more in messages of pseudo-random
 * sizes on both connections and checks every echoed byte, then closes both.
 * The server's set must go on working across the switch: every byte echoed,
 * then EOF (read() = 0) reached from an epoll event on each connection, and
 * after that the set reports what the kernel's does for a peer that closed
 * (design brief, layer 5: the peer notices nothing).  Two connections, so
 * four halves switch back to TCP. */
// expect: switched 4
#include "epoll_common.h"
#include "exec_common.h"

/* the client: echo_exec_client (exec_common.h); client -> server streams
 * (and so their echoes): seed 31 on connection 1, seed 32 on connection 2,
 * offsets counted from the first byte after the handshake */
#define INFLIGHT2 12345         /* sent on 2 before the exec; none of its echo read */

/* ---- the server: an echoing event loop ------------------------------------ */

struct econn {
	int fd;
	uint64_t tag;
	bool et;
	uint32_t cur;           /* the events registered */
	char *buf;              /* read, not echoed yet: [off, len) */
	size_t off, len, cap;
	uint64_t in, out;       /* bytes read, bytes echoed */
	bool eof;
};

/* read until EAGAIN or EOF, keeping everything; false on an error */
static bool e_read(struct econn *c)
{
	for (;;) {
		if (c->cap - c->len < 65536) {
			if (c->off) {
				memmove(c->buf, c->buf + c->off, c->len - c->off);
				c->len -= c->off;
				c->off = 0;
			}
			if (c->cap - c->len < 65536) {
				c->cap = c->cap ? c->cap * 2 : 262144;
				c->buf = realloc(c->buf, c->cap);
				if (!c->buf)
					fatal("realloc");
			}
		}
		ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (r > 0) {
			c->len += (size_t)r;
			c->in += (uint64_t)r;
			continue;
		}
		if (r == 0) {
			c->eof = true;
			return true;
		}
		if (errno == EINTR)
			continue;
		return errno == EAGAIN;
	}
}

/* write what is kept until EAGAIN; false on an error */
static bool e_flush(struct econn *c)
{
	while (c->off < c->len) {
		ssize_t w = send(c->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
		if (w > 0) {
			c->off += (size_t)w;
			c->out += (uint64_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		return w < 0 && errno == EAGAIN;
	}
	c->off = c->len = 0;
	return true;
}

static void e_set(int ep, struct econn *c, uint32_t want)
{
	if (want == c->cur)
		return;
	struct epoll_event ev = { .events = want, .data.u64 = c->tag };
	if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		fatal("epoll_ctl MOD");
	c->cur = want;
}

static void server(int lfd)
{
	struct econn cs[2] = {
		{ .fd = server_conn(lfd), .tag = 1, .et = false },
		{ .fd = server_conn(lfd), .tag = 2, .et = true },
	};
	say("accepted 2 connections");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		fatal("epoll_create1");
	for (int i = 0; i < 2; i++) {
		struct econn *c = &cs[i];
		int fl = fcntl(c->fd, F_GETFL);
		if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			fatal("O_NONBLOCK");
		c->cur = c->et ? EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET : EPOLLIN | EPOLLRDHUP;
	}
	ctl("ADD connection 1 EPOLLIN|EPOLLRDHUP (level-triggered)", ep, EPOLL_CTL_ADD,
	    cs[0].fd, cs[0].cur, 1);
	ctl("ADD connection 2 EPOLLIN|EPOLLOUT|EPOLLRDHUP|EPOLLET", ep, EPOLL_CTL_ADD,
	    cs[1].fd, cs[1].cur, 2);

	int live = 2;
	while (live) {
		struct epoll_event ev[4];
		int n = epoll_wait(ep, ev, 4, 10000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fatal("epoll_wait = %d (%d connections open)", n, live);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 < 1 || ev[i].data.u64 > 2)
				fatal("epoll_wait: unknown tag %llu", (unsigned long long)ev[i].data.u64);
			struct econn *c = &cs[ev[i].data.u64 - 1];
			if (c->eof)
				fatal("connection %llu: events %s after EOF",
				      (unsigned long long)c->tag, pmask((int)ev[i].events));
			if (ev[i].events & (EPOLLERR | EPOLLHUP))
				fatal("connection %llu: events %s", (unsigned long long)c->tag,
				      pmask((int)ev[i].events));
			if (!e_read(c))
				fatal("connection %llu: read", (unsigned long long)c->tag);
			if (!e_flush(c))
				fatal("connection %llu: write", (unsigned long long)c->tag);
			if (c->eof) {
				/* nothing more wanted from it until the end */
				e_set(ep, c, 0);
				live--;
			} else if (!c->et) {
				e_set(ep, c, EPOLLIN | EPOLLRDHUP | (c->off < c->len ? EPOLLOUT : 0));
			}
		}
	}
	for (int i = 0; i < 2; i++) {
		struct econn *c = &cs[i];
		say("connection %d (%s): read %llu bytes, echoed %llu, then read() = 0 "
		    "after an epoll event, nothing left to echo: %s", i + 1,
		    c->et ? "EPOLLET" : "level-triggered", (unsigned long long)c->in,
		    (unsigned long long)c->out, yesno(c->off == c->len));
	}
	ctl("MOD connection 1 EPOLLIN|EPOLLRDHUP", ep, EPOLL_CTL_MOD, cs[0].fd,
	    EPOLLIN | EPOLLRDHUP, 1);
	ctl("MOD connection 2 EPOLLIN|EPOLLRDHUP|EPOLLET", ep, EPOLL_CTL_MOD, cs[1].fd,
	    EPOLLIN | EPOLLRDHUP | EPOLLET, 2);
	wait_report(ep, "both at EOF", 1000);
	wait_report(ep, "again (only the level-triggered one)", 100);
	char b;
	res("read connection 1", read(cs[0].fd, &b, 1));
	res("read connection 2", read(cs[1].fd, &b, 1));
	res("close connection 1", close(cs[0].fd));
	res("close connection 2", close(cs[1].fd));
	wait_report(ep, "both closed", 0);
	close(ep);
	free(cs[0].buf);
	free(cs[1].buf);
}

/* ---- the client ---------------------------------------------------------- */

/* after the in-flight bytes on connection 2: their echo is on its way */
static void sent2(int fd2)
{
	struct pollfd p = { .fd = fd2, .events = POLLIN };
	say("connection 2: sent %d, its echo arriving: %s", INFLIGHT2,
	    yesno(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN)));
}

static void client(void)
{
	echo_exec_client(31, 4242, INFLIGHT2, sent2);
}

int main(void)
{
	return run(server, client);
}
