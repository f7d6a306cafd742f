/* SPDX-License-Identifier: MIT */
/* The server is waiting to send (the client reads nothing), with the
 * client's bytes unread in its own receive queue, when the client, which
 * had forked an idle child holding the connection, is killed, then the
 * child too.  Three times: the server blocked in send; nonblocking, asleep
 * in poll for POLLOUT; nonblocking, asleep in epoll_wait for EPOLLOUT.  As
 * with the kernel, the wait ends: the send cut short, then an error
 * (ECONNRESET or EPIPE); poll and epoll report the error and the hang-up.
 *
 * The owner's death is taken as a switch to come (a child may go on with
 * the connection) once the server has read what the owner left; nothing
 * made room in the ring meanwhile, and the server waited for ever though
 * the child's death ended the kernel connection (found by test_soak.py's
 * fork/exec soak). */
#include "common.h"
#include <sys/epoll.h>

#define BIG (64u << 20)

enum { BLOCKING, POLL, EPOLL };
static const char *const how[] = { "blocked in send", "in poll", "in epoll_wait" };

static void server(int lfd)
{
	char *buf = calloc(1, BIG);
	if (!buf)
		fatal("calloc");
	for (int m = BLOCKING; m <= EPOLL; m++) {
		int fd = server_conn(lfd);
		int ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 7 };
		if (m != BLOCKING)
			fcntl(fd, F_SETFL, O_NONBLOCK);
		if (ep < 0 || (m == EPOLL && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0))
			fatal("epoll");
		await_peer();           /* the owner sent 100000 and forked its child */
		tell();                 /* kill them once we wait */
		ssize_t n = 0;
		int r = 0;
		short revents = 0;
		for (;;) {
			ssize_t k = send(fd, buf, BIG, MSG_NOSIGNAL);
			if (k > 0)
				n += k;
			if (m == BLOCKING || (k < 0 && errno != EAGAIN))
				break;
			if (k > 0)
				continue;
			if (m == POLL) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				r = poll(&p, 1, -1);
				revents = p.revents;
			} else {
				struct epoll_event got;
				r = epoll_wait(ep, &got, 1, -1);
				revents = (short)got.events;
			}
			break;
		}
		say("%s: bytes went before the kill: %s", how[m], yesno(n > 0));
		if (m != BLOCKING)
			say("%s: %d, error and hang-up: %s", how[m], r,
			    yesno((revents & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP)));
		n = send(fd, buf, BIG, MSG_NOSIGNAL);
		int e = errno;
		say("%s: send again: %s", how[m], n < 0 && (e == ECONNRESET || e == EPIPE) ?
		    "ECONNRESET or EPIPE" : n < 0 ? ename(e) : "succeeded");
		close(ep);
		res("close", close(fd));
	}
	free(buf);
}

static void client(void)
{
	for (int m = BLOCKING; m <= EPOLL; m++) {
		int kp[2], hold[2];
		if (pipe(kp) < 0 || pipe(hold) < 0)
			fatal("pipe");
		pid_t owner = t_fork();
		if (owner == 0) {
			int fd = client_conn();
			send_pattern(fd, 100000, 5);
			pid_t kid = t_fork();
			if (kid == 0) {
				char c;
				while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
				}
				_exit(0);
			}
			if (write(kp[1], &kid, sizeof(kid)) != sizeof(kid))
				fatal("write");
			tell();         /* server: go on */
			for (;;)
				pause();
		}
		pid_t kid;
		if (read(kp[0], &kid, sizeof(kid)) != sizeof(kid))
			fatal("read");
		await_peer();           /* the server goes into its wait */
		await_peer_asleep();
		kill(owner, SIGKILL);
		waitpid(owner, NULL, 0);
		kill(kid, SIGKILL);
		say("%s: the owner, then its idle child, killed", how[m]);
		close(kp[0]);
		close(kp[1]);
		close(hold[0]);
		close(hold[1]);
	}
}

int main(void)
{
	return run(server, client);
}
