/* SPDX-License-Identifier: MIT */
/* A process with an accelerated connection spawns a helper with vfork(),
 * and the vfork child closes its fds with close_range(3, ~0U, 0) before
 * exec (what CPython's subprocess does with close_fds=True, the default).
 * The child's close_range closes only the child's fd table: the parent's
 * connection must go on. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[100];
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	res("server: recv 100 after the client's vfork+close_range", n);
	if (n > 0)
		res("server: echo", send_all(fd, buf, (size_t)n));
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	fflush(t_out);
	pid_t k = vfork();
	if (k == 0) {
		close_range(3, ~0u, 0);
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	int st;
	waitpid(k, &st, 0);
	say("helper exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	char buf[100];
	memset(buf, 'x', sizeof(buf));
	res("client: send 100", send_all(fd, buf, sizeof(buf)));
	res("client: recv echo", recv_all(fd, buf, sizeof(buf)));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
