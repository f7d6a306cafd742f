/* SPDX-License-Identifier: MIT */
/* A process hands an accelerated connection to a program it runs, under
 * another fd number: vfork, then in the child dup2 to fd 5 (the original
 * close-on-exec) and exec a shell that reads from 5 and answers on it.
 * Go's os/exec does this with ExtraFiles (dup3 in its vfork child).  The
 * child's dup2 is not in our table (it is the parent's), so the exec must
 * find the connection by what survives it, and its owner switch it back
 * to TCP: the shell reads the client's line and its answer arrives.
 * (How many halves count as switched depends on which end learns first.) */
#include <fcntl.h>
#include <sys/wait.h>

#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	pid_t k = vfork();
	if (k == 0) {
		dup2(fd, 5);
		execl("/bin/sh", "sh", "-c", "read x <&5; echo \"got $x\" >&5", (char *)NULL);
		_exit(127);
	}
	close(fd);
	tell();                 /* the shell has the connection */
	int st;
	waitpid(k, &st, 0);
	say("server: the shell exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	res("client: send a line", send_all(fd, "hello\n", 6));
	char buf[64];
	res("client: recv the shell's answer", recv_all(fd, buf, 10));
	say("client: answer \"%.9s\"", buf);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
