/* SPDX-License-Identifier: MIT */
/* MSG_PEEK | MSG_WAITALL waits until the whole length is there (as
 * tcp_recvmsg does: the peek goes on past what it copied), leaving it all
 * to read; at the end of the stream it returns what there is.  The second
 * 100 come once the client sleeps in the peek (its state), not after a
 * fixed time. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[300];
	pattern(buf, 300, 0, 41);
	res("send 100", send(fd, buf, 100, 0));
	await_peer_asleep();                    /* the client waits for 200 */
	res("send 100 more", send(fd, buf + 100, 100, 0));
	await_peer();
	res("send 50 more", send(fd, buf + 200, 50, 0));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	await_peer();
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	char buf[300], want[300];
	pattern(want, 300, 0, 41);
	res("recv(PEEK|WAITALL, 200)", recv(fd, buf, 200, MSG_PEEK | MSG_WAITALL));
	say("the 200 peeked exact: %s", yesno(memcmp(buf, want, 200) == 0));
	res("recv(200) after", recv(fd, buf, 200, MSG_WAITALL));
	say("the 200 read exact: %s", yesno(memcmp(buf, want, 200) == 0));
	tell();
	res("recv(PEEK|WAITALL, 100) at the end", recv(fd, buf, 100, MSG_PEEK | MSG_WAITALL));
	say("the 50 peeked exact: %s", yesno(memcmp(buf, want + 200, 50) == 0));
	res("recv(100) after", recv(fd, buf, 100, 0));
	res("recv at EOF", recv(fd, buf, 100, 0));
	tell();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
