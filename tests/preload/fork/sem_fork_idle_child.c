/* SPDX-License-Identifier: MIT */
/* A child forked while connections are open that never touches them (Redis
 * BGSAVE, a fork for a background job): the server forks an idle child that
 * only waits on a pipe, then _exit(0)s.
 *
 * Connection 1: while the child lives, the server (epoll_wait before each
 * message) and the client (poll before each echo) exchange 40 messages of
 * various sizes, every byte checked; the child is told to exit and reaped
 * before anyone closes; the client closes, the server reads EOF.  Nothing
 * switches: the connection is only ever used by the process that set it up.
 *
 * Connection 2: set up before a second idle child is forked, a few messages
 * exchanged while it lives, then the server closes its fd.  The client sees
 * no EOF (poll for 300 ms returns 0) as long as the idle child holds the
 * socket; once the child exited, recv returns 0.  The owner's close while a
 * child forked afterwards holds the connection switches it back to TCP:
 * two halves switch in all. */
// expect: switched 2
#include "common.h"
#include <sys/epoll.h>

#define NMSG 40

static size_t msg_size(int i)
{
	return (size_t)((i * 7919 + 13) % 20000) + 1;
}

/* fork a child that touches nothing, waits for a byte (or EOF) on the pipe
 * and _exit(0)s; *wfd: the parent's end */
static pid_t idle_child(int *wfd)
{
	int kp[2];
	if (pipe(kp) < 0)
		fatal("pipe");
	pid_t pid = t_fork();
	if (pid == 0) {
		char c;
		close(kp[1]);
		while (read(kp[0], &c, 1) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(kp[0]);
	*wfd = kp[1];
	return pid;
}

static void end_idle_child(pid_t pid, int wfd, const char *label)
{
	int st;
	if (write(wfd, "x", 1) != 1)
		fatal("write to the idle child");
	close(wfd);
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("%s exited and was reaped: %s", label, yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

static void server(int lfd)
{
	char c;
	int wfd;

	/* connection 1 */
	int fd = server_conn(lfd);
	pid_t pid = idle_child(&wfd);
	say("connection 1: forked an idle child");
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fatal("epoll");
	tell();
	bool ok = true, events_ok = true;
	size_t off = 0;
	for (int i = 0; i < NMSG; i++) {
		size_t n = msg_size(i);
		struct epoll_event got;
		int r = epoll_wait(ep, &got, 1, 5000);
		events_ok = events_ok && r == 1 && got.data.u64 == 1 && (got.events & EPOLLIN);
		ok = ok && recv_exact_at(fd, off, n, 81);
		send_at(fd, off, n, 82);
		off += n;
	}
	say("connection 1: %d messages, %zu bytes, each reported by epoll_wait: %s, exact: %s",
	    NMSG, off, yesno(events_ok), yesno(ok));
	await_peer();                           /* the client read the last answer */
	end_idle_child(pid, wfd, "connection 1: the idle child");
	tell();
	res("connection 1: recv at EOF", recv(fd, &c, 1, 0));
	res("connection 1: close", close(fd));
	close(ep);

	/* connection 2 */
	fd = server_conn(lfd);
	pid = idle_child(&wfd);
	say("connection 2: forked an idle child");
	say("connection 2: message (3000), exact: %s", yesno(recv_exact_at(fd, 0, 3000, 83)));
	send_at(fd, 0, 5000, 84);
	await_peer();                           /* the client read the 5000 */
	res("connection 2: close while the idle child holds it", close(fd));
	tell();
	await_peer();                           /* the client polled */
	end_idle_child(pid, wfd, "connection 2: the idle child");
	tell();
}

static void client(void)
{
	char c;

	/* connection 1 */
	int fd = client_conn();
	await_peer();                           /* the server forked its idle child */
	bool ok = true, events_ok = true;
	size_t off = 0;
	for (int i = 0; i < NMSG; i++) {
		size_t n = msg_size(i);
		send_at(fd, off, n, 81);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		events_ok = events_ok && poll(&p, 1, 5000) == 1 && (p.revents & POLLIN);
		ok = ok && recv_exact_at(fd, off, n, 82);
		off += n;
	}
	say("connection 1: %d answers, %zu bytes, each reported by poll: %s, exact: %s",
	    NMSG, off, yesno(events_ok), yesno(ok));
	poll1("connection 1: nothing more", fd, POLLIN, 0);
	tell();
	await_peer();                           /* the idle child is gone */
	res("connection 1: close", close(fd));

	/* connection 2 */
	fd = client_conn();
	send_at(fd, 0, 3000, 83);
	say("connection 2: answer (5000), exact: %s", yesno(recv_exact_at(fd, 0, 5000, 84)));
	tell();
	await_peer();                           /* the server closed its fd */
	poll1("connection 2: after the server's close, the idle child alive (300 ms)", fd,
	      POLLIN, 300);
	tell();
	await_peer();                           /* the idle child is gone */
	res("connection 2: recv at EOF", recv(fd, &c, 1, 0));
	res("connection 2: close", close(fd));
}

int main(void)
{
	return run(server, client);
}
