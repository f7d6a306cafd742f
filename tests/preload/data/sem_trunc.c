/* SPDX-License-Identifier: MIT */
/* recv with MSG_TRUNC: TCP discards the bytes instead of copying them (a
 * NULL buffer is fine); with MSG_PEEK it counts them and leaves them.
 * MSG_OOB is not supported by shortcut, so it is not exercised here.  The
 * server looks once the client's bytes (and FIN) have arrived, which it
 * waits for (FIONREAD, poll), not for a fixed time. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[4096];

	await_peer();                           /* client sent 3000 bytes */
	wait_inq(fd, 3000);
	res("recv(NULL, 1000, TRUNC)", recv(fd, NULL, 1000, MSG_TRUNC));
	res("recv(buf, 500, PEEK|TRUNC)", recv(fd, buf, 500, MSG_PEEK | MSG_TRUNC));
	res("recv(buf, 100)", recv(fd, buf, 100, 0));
	say("byte at 1000: %d", (unsigned char)buf[0]);
	res("recv(NULL, 5000, TRUNC|DONTWAIT)", recv(fd, NULL, 5000, MSG_TRUNC | MSG_DONTWAIT));
	res("recv(TRUNC|DONTWAIT) empty", recv(fd, NULL, 10, MSG_TRUNC | MSG_DONTWAIT));
	say("errno %s", ename(errno));
	tell();
	await_peer();                           /* client sent 200 more, then shut down */
	wait_ev(fd, POLLRDHUP);
	res("recv(NULL, 1000, TRUNC|WAITALL) to EOF", recv(fd, NULL, 1000, MSG_TRUNC | MSG_WAITALL));
	res("recv at EOF", recv(fd, buf, sizeof(buf), MSG_TRUNC));
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	char buf[3000];

	for (int i = 0; i < 3000; i++)
		buf[i] = (char)(i / 10);
	res("send 3000", send_all(fd, buf, 3000));
	tell();
	await_peer();
	res("send 200", send_all(fd, buf, 200));
	res("shutdown", shutdown(fd, SHUT_WR));
	tell();
	res("recv EOF", recv(fd, buf, sizeof(buf), 0));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
