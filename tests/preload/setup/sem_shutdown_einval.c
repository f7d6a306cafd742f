/* SPDX-License-Identifier: MIT */
/* shutdown(fd, 7) fails with EINVAL and changes nothing: a later reader
 * (here a fork child, which moves the connection to TCP) still gets the
 * peer's bytes. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	res("shutdown(fd, 7)", shutdown(fd, 7));
	fflush(t_out);
	pid_t k = fork();
	if (k == 0) {
		char buf[10];
		tell();
		ssize_t n = recv_all(fd, buf, sizeof(buf));
		say("child: recv 10 = %zd", n);
		fflush(t_out);
		_exit(0);
	}
	int st;
	waitpid(k, &st, 0);
	await_peer();
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	await_peer();
	msleep(300);
	res("send 10", send(fd, "0123456789", 10, 0));
	tell();
	char b;
	recv(fd, &b, 1, 0);
	close(fd);
}

int main(void)
{
	return run(server, client);
}
