/* SPDX-License-Identifier: MIT */
/* A connection handed to another process with SCM_RIGHTS, data in flight
 * both ways: the client forks a helper (before it connects; a unix
 * socketpair between them), exchanges some data with the server, sends
 * 20000 bytes the server has not read, leaves 50000 of the server's unread,
 * passes the fd to the helper and closes its own copy.  The helper reads the
 * server's 50000 and 2000 more sent after the hand-over, exact and in order,
 * sends 10000 and shuts down writing; the server gets the client's 20000 then
 * the helper's 10000, exact and in order, then EOF (design brief, layer 5:
 * the connection switches back to TCP). */
// expect: switched 2
#include "common.h"
#include <sys/uio.h>

/* client -> server: seed 21, offsets 0..5000 5000..25000 (client) 25000..35000
 * (helper); server -> client: seed 22, 0..3000 3000..53000 53000..55000 */

static void server(int lfd)
{
	int fd = server_conn(lfd);
	say("received 5000, exact: %s", yesno(recv_exact_at(fd, 0, 5000, 21)));
	send_at(fd, 0, 3000, 22);
	await_peer();                           /* the client sent 20000 more */
	send_at(fd, 3000, 50000, 22);
	say("sent 50000 before the hand-over");
	tell();
	await_peer();                           /* the helper holds the fd */
	send_at(fd, 53000, 2000, 22);
	say("sent 2000 after the hand-over");
	char buf[30001];
	char want[30000];
	pattern(want, sizeof(want), 5000, 21);
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	say("received %zd bytes up to EOF, exact: %s", n,
	    yesno(n == 30000 && !memcmp(buf, want, sizeof(want))));
	res("close", close(fd));
}

static void helper(int us)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	if (recvmsg(us, &m, 0) != 1)
		fatal("helper: recvmsg");
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		fatal("helper: no fd");
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	tell();                                 /* to the server: the helper holds the fd */
	if (read(us, &c, 1) != 1)               /* the client has said all it says */
		fatal("helper: go");
	say("helper: received the fd");
	say("helper: received 52000, exact: %s", yesno(recv_exact_at(fd, 3000, 52000, 22)));
	send_at(fd, 25000, 10000, 21);
	say("helper: sent 10000");
	res("helper: shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("helper: recv at EOF", recv(fd, &c, 1, 0));
	res("helper: close", close(fd));
	fflush(t_out);
	_exit(0);
}

static void client(void)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		fatal("socketpair");
	pid_t pid = t_fork();
	if (pid == 0) {
		close(sp[0]);
		helper(sp[1]);
	}
	close(sp[1]);

	int fd = client_conn();
	send_at(fd, 0, 5000, 21);
	say("received 3000, exact: %s", yesno(recv_exact_at(fd, 0, 3000, 22)));
	send_at(fd, 5000, 20000, 21);
	say("sent 20000 before the hand-over");
	tell();
	await_peer();                           /* the server sent 50000 */

	res("sendmsg(SCM_RIGHTS) to the helper", send_fd(sp[0], fd));
	res("close its own copy", close(fd));
	fflush(t_out);
	if (write(sp[0], "g", 1) != 1)          /* the helper's lines come after these */
		fatal("go");
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("helper ran to the end: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

int main(void)
{
	return run(server, client);
}
