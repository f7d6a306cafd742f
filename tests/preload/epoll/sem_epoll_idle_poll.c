/* SPDX-License-Identifier: MIT */
/* A server polling its epoll set with a zero timeout and nothing ready,
 * a thousand times in a row (under `shortcut run` its channel is then
 * armed, and such polls skip the walk over its cells while nothing comes):
 * a byte sent by a peer, already readable on the connection (FIONREAD),
 * is reported by the very next epoll_wait(0), on the right connection,
 * level-triggered or edge-triggered; so is a peer's close (RDHUP).  Eight
 * connections from eight client processes (eight link groups: eight
 * cells, as many as arming needs). */
#include "common.h"
#include <sys/epoll.h>

#define NCONN 8
#define ROUNDS 24
#define POLLS 1000      /* zero-timeout polls before each event */

static int idle_polls(int ep)
{
	struct epoll_event out[16];
	int got = 0;
	for (int i = 0; i < POLLS; i++) {
		int n = epoll_wait(ep, out, 16, 0);
		if (n != 0)
			got++;
	}
	return got;
}

/* the one event the next epoll_wait(0) must report: fd index want, mask */
static bool one_event(int ep, int want, uint32_t mask, const char *what)
{
	struct epoll_event out[16];
	int n = epoll_wait(ep, out, 16, 0);
	if (n == 1 && out[0].data.u64 == (uint64_t)want && (out[0].events & mask) == mask)
		return true;
	say("%s: epoll_wait(0) = %d, first data %llu events %s", what, n,
	    n > 0 ? (unsigned long long)out[0].data.u64 : 0ull,
	    n > 0 ? pmask((int)out[0].events) : "-");
	return false;
}

static void server(int lfd)
{
	int fds[NCONN], ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < NCONN; i++) {
		fds[i] = server_conn(lfd);
		/* odd ones edge-triggered */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | (i % 2 ? EPOLLET : 0),
					  .data.u64 = (uint64_t)i };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) < 0)
			fatal("epoll_ctl");
	}
	int stray = 0, good = 0;
	for (int r = 0; r < ROUNDS; r++) {
		int i = (r * 3) % NCONN;
		stray += idle_polls(ep);
		tell_u64((uint64_t)i);          /* send a byte on connection i */
		await_peer();                   /* sent */
		wait_inq(fds[i], 1);            /* readable on the socket */
		char what[32], b;
		snprintf(what, sizeof(what), "round %d", r);
		if (one_event(ep, i, EPOLLIN, what))
			good++;
		if (recv(fds[i], &b, 1, 0) != 1 || b != 'a' + r)
			say("round %d: wrong byte", r);
	}
	say("polls that found something while idle: %d", stray);
	say("rounds whose byte the next epoll_wait(0) reported: %d of %d", good, ROUNDS);
	/* a peer's close after an idle stretch */
	stray = idle_polls(ep);
	tell_u64(NCONN);                        /* close connection 5 */
	await_peer();
	wait_ev(fds[5], POLLRDHUP);
	say("close: stray %d, reported %s", stray,
	    yesno(one_event(ep, 5, EPOLLIN | EPOLLRDHUP, "close")));
	tell_u64(NCONN + 1);                    /* done */
	for (int i = 0; i < NCONN; i++)
		close(fds[i]);
	close(ep);
}

/* helper i: connection i, driven through its pipe ('s' + round: send a
 * byte; 'x': close; 'q': quit) */
static void helper(int i, int cmd, int ack)
{
	int fd = client_conn();
	unsigned char c[2];
	(void)i;
	if (write(ack, "c", 1) != 1)
		_exit(1);
	while (read(cmd, c, 2) == 2) {
		if (c[0] == 'q')
			break;
		if (c[0] == 'x') {
			close(fd);
		} else {
			char b = (char)('a' + c[1]);
			if (send(fd, &b, 1, 0) != 1)
				_exit(1);
		}
		if (write(ack, "k", 1) != 1)
			_exit(1);
	}
	_exit(0);
}

static void client(void)
{
	/* connection 0 is ours, each other one a helper process's: eight
	 * link groups, eight cells in the server's channel */
	int fd0 = client_conn(), cmd[NCONN][2], ack[2];
	pid_t kids[NCONN];
	char c;
	if (pipe(ack) < 0)
		fatal("pipe");
	for (int i = 1; i < NCONN; i++) {
		if (pipe(cmd[i]) < 0)
			fatal("pipe");
		kids[i] = t_fork();
		if (kids[i] == 0) {
			close(cmd[i][1]);
			close(ack[0]);
			helper(i, cmd[i][0], ack[1]);
		}
		close(cmd[i][0]);
		if (read(ack[0], &c, 1) != 1)   /* connected: the next one is accepted after it */
			fatal("helper %d", i);
	}
	for (int r = 0;; r++) {
		uint64_t i = await_u64();
		if (i == NCONN + 1)
			break;
		int k = i == NCONN ? 5 : (int)i;
		unsigned char m[2] = { i == NCONN ? 'x' : 's', (unsigned char)r };
		if (k == 0) {
			char b = (char)('a' + r);
			if (send(fd0, &b, 1, 0) != 1)
				fatal("send");
		} else if (write(cmd[k][1], m, 2) != 2 || read(ack[0], &c, 1) != 1) {
			fatal("helper %d", k);
		}
		tell();
	}
	for (int i = 1; i < NCONN; i++) {
		unsigned char m[2] = { 'q', 0 };
		if (write(cmd[i][1], m, 2) != 2)
			fatal("helper %d", i);
		waitpid(kids[i], NULL, 0);
	}
	close(fd0);
	say("done");
}

int main(void)
{
	return run(server, client);
}
