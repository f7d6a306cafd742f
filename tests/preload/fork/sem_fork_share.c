/* SPDX-License-Identifier: MIT */
/* A connection shared across fork, used by the child and then by the
 * parent, as a kernel socket is: the client exchanges a few messages, the
 * server sends 30000 bytes the client has not read, the client forks; the
 * child reads those 30000 (exact), sends 5000, reads the server's answer
 * (7000) and exits without closing; the parent waits for it and goes on with
 * the same fd: nothing left to read, sends 12000, reads the answer (25000),
 * closes.  The server gets every byte exact and in order (the client's
 * messages, the child's 5000, the parent's 12000), then EOF.  The child's
 * first use switches the connection back to TCP (it belongs to the parent,
 * which set it up), so two halves switch. */
// expect: switched 2
#include "common.h"

/* client -> server, seed 51: 0..100 and 100..1100 (messages), 1100..6100
 * (the child), 6100..18100 (the parent after the child);
 * server -> client, seed 52: 0..200 and 200..3200 (answers), 3200..33200
 * (unread at the fork), 33200..40200 (to the child), 40200..65200 (to the
 * parent after the child) */

static void server(int lfd)
{
	int fd = server_conn(lfd);
	say("message 1 (100), exact: %s", yesno(recv_exact_at(fd, 0, 100, 51)));
	send_at(fd, 0, 200, 52);
	say("message 2 (1000), exact: %s", yesno(recv_exact_at(fd, 100, 1000, 51)));
	send_at(fd, 200, 3000, 52);
	send_at(fd, 3200, 30000, 52);
	say("sent 30000 the client has not read");
	tell();
	say("the child's 5000, exact: %s", yesno(recv_exact_at(fd, 1100, 5000, 51)));
	send_at(fd, 33200, 7000, 52);
	say("sent 7000 (for the child)");
	say("the parent's 12000, exact: %s", yesno(recv_exact_at(fd, 6100, 12000, 51)));
	send_at(fd, 40200, 25000, 52);
	say("sent 25000 (for the parent)");
	char c;
	res("recv at EOF", recv(fd, &c, 1, 0));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	send_at(fd, 0, 100, 51);
	say("answer 1 (200), exact: %s", yesno(recv_exact_at(fd, 0, 200, 52)));
	send_at(fd, 100, 1000, 51);
	say("answer 2 (3000), exact: %s", yesno(recv_exact_at(fd, 200, 3000, 52)));
	await_peer();                           /* the server sent 30000 */
	say("fork with 30000 unread");
	pid_t pid = t_fork();
	if (pid == 0) {
		alarm(20);
		say("child: the 30000, exact: %s", yesno(recv_exact_at(fd, 3200, 30000, 52)));
		send_at(fd, 1100, 5000, 51);
		say("child: sent 5000");
		say("child: the answer (7000), exact: %s",
		    yesno(recv_exact_at(fd, 33200, 7000, 52)));
		say("child: exit without closing");
		fflush(t_out);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("child ran to the end: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	poll1("parent: nothing left to read", fd, POLLIN | POLLOUT, 0);
	send_at(fd, 6100, 12000, 51);
	say("parent: sent 12000");
	say("parent: the answer (25000), exact: %s", yesno(recv_exact_at(fd, 40200, 25000, 52)));
	res("parent: close", close(fd));
}

int main(void)
{
	return run(server, client);
}
