/* SPDX-License-Identifier: MIT */
/* The server is blocked in send (the client reads nothing), with the
 * client's bytes unread in its own receive queue, when the client, which
 * had forked an idle child holding the connection, is killed, then the
 * child too.  As with the kernel, the send ends: cut short, then an error
 * (ECONNRESET or EPIPE).  The owner's death is taken as a switch to come
 * (a child may go on with the connection) once the server has read what
 * the owner left; a send found the ring full for good meanwhile and waited
 * on it for ever, though the child's death ended the kernel connection
 * (found by test_soak.py's fork/exec soak). */
#include "common.h"

#define BIG (64u << 20)

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                   /* the owner sent 100000 and forked its child */
	tell();                         /* kill them once we are blocked in send */
	char *buf = calloc(1, BIG);
	if (!buf)
		fatal("calloc");
	ssize_t n = send(fd, buf, BIG, MSG_NOSIGNAL);
	say("send 64 MiB to the killed peer: cut short: %s", yesno(n >= 0 && (size_t)n < BIG));
	n = send(fd, buf, BIG, MSG_NOSIGNAL);
	int e = errno;
	say("send again: %s", n < 0 && (e == ECONNRESET || e == EPIPE) ? "ECONNRESET or EPIPE" :
	    n < 0 ? ename(e) : "succeeded");
	free(buf);
	res("close", close(fd));
}

static void client(void)
{
	int kp[2], hold[2];
	if (pipe(kp) < 0 || pipe(hold) < 0)
		fatal("pipe");
	fflush(t_out);
	pid_t owner = fork();
	if (owner < 0)
		fatal("fork");
	if (owner == 0) {
		int fd = client_conn();
		send_pattern(fd, 100000, 5);
		pid_t kid = fork();
		if (kid < 0)
			fatal("fork");
		if (kid == 0) {
			char c;
			while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
			}
			_exit(0);
		}
		if (write(kp[1], &kid, sizeof(kid)) != sizeof(kid))
			fatal("write");
		tell();                 /* server: go on */
		for (;;)
			pause();
	}
	pid_t kid;
	if (read(kp[0], &kid, sizeof(kid)) != sizeof(kid))
		fatal("read");
	await_peer();                   /* the server goes into its send */
	await_peer_asleep();
	kill(owner, SIGKILL);
	waitpid(owner, NULL, 0);
	kill(kid, SIGKILL);
	say("the owner, then its idle child, killed");
}

int main(void)
{
	return run(server, client);
}
