/* SPDX-License-Identifier: MIT */
/* ioctl FIONREAD / SIOCINQ: bytes waiting, unchanged by MSG_PEEK, lowered
 * by reads, 0 at EOF.  Each side reads the count once the peer's bytes (or
 * its FIN) have arrived, which it waits for (FIONREAD reaching the count,
 * poll for POLLRDHUP), not for a fixed time. */
#include "common.h"
#include <linux/sockios.h>

static void inq(const char *label, int fd)
{
	int v = -1;
	int rc = ioctl(fd, FIONREAD, &v);
	if (rc < 0)
		say("%s: FIONREAD = -1 %s", label, ename(errno));
	else
		say("%s: FIONREAD %d", label, v);
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[2000];

	inq("empty", fd);
	tell();
	await_peer();                           /* client sent 1000 */
	wait_inq(fd, 1000);
	inq("after 1000 sent", fd);
	int v = -1;
	res("ioctl(SIOCINQ)", ioctl(fd, SIOCINQ, &v));
	say("SIOCINQ %d", v);
	res("recv(PEEK, 100)", recv(fd, buf, 100, MSG_PEEK));
	inq("after peek", fd);
	res("recv 300", recv(fd, buf, 300, 0));
	inq("after reading 300", fd);
	tell();
	await_peer();                           /* client sent 500 more */
	wait_inq(fd, 1200);
	inq("after 500 more", fd);
	res("recv all", recv_all(fd, buf, 1200));
	inq("drained", fd);
	res("send 5", send(fd, "abcde", 5, 0));
	tell();
	await_peer();                           /* client: SHUT_WR */
	wait_ev(fd, POLLRDHUP);
	inq("at EOF", fd);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	inq("after reading EOF", fd);
	res("close", close(fd));
	tell();
}

static void client(void)
{
	int fd = client_conn();
	char buf[1000];

	await_peer();
	pattern(buf, 1000, 0, 7);
	res("send 1000", send(fd, buf, 1000, 0));
	tell();
	await_peer();
	res("send 500", send(fd, buf, 500, 0));
	tell();
	await_peer();
	wait_inq(fd, 5);
	inq("server sent 5", fd);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	inq("after own SHUT_WR", fd);
	tell();
	await_peer();
	wait_ev(fd, POLLRDHUP);
	inq("after peer close", fd);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
	inq("closed fd", fd);
}

int main(void)
{
	return run(server, client);
}
