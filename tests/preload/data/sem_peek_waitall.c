/* SPDX-License-Identifier: MIT */
/* MSG_PEEK leaves the data; MSG_WAITALL waits for all n bytes across several
 * sends (and returns short at EOF); MSG_DONTWAIT on an empty socket gives
 * EAGAIN; a zero-length recv returns 0. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[8192];
	ssize_t n;

	res("recv(DONTWAIT) on empty", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	res("recv(PEEK|DONTWAIT) on empty", recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT));
	res("recv(len 0, DONTWAIT) on empty", recv(fd, buf, 0, MSG_DONTWAIT));
	tell();                                 /* client: send "hello world" */
	n = recv(fd, buf, sizeof(buf), MSG_PEEK);
	res("recv(PEEK)", n);
	say("peeked \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	n = recv(fd, buf, 3, MSG_PEEK);
	res("recv(PEEK, 3)", n);
	say("peeked \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	res("recv(PEEK|DONTWAIT) again", n);
	n = recv(fd, buf, 5, 0);
	res("recv(5)", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	n = recv(fd, buf, sizeof(buf), MSG_PEEK);
	res("recv(PEEK) rest", n);
	say("peeked \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("recv(len 0) with data", recv(fd, buf, 0, 0));
	n = recv(fd, buf, sizeof(buf), 0);
	res("recv rest", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("recv(DONTWAIT) drained", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));

	tell();                                 /* client: 4 x 1000 bytes, spaced */
	n = recv(fd, buf, 4000, MSG_WAITALL);
	res("recv(WAITALL, 4000)", n);
	say("checksum ok: %s", yesno(n == 4000 && ck(CK_INIT, buf, 4000) == pattern_ck(4000, 1)));
	await_peer();
	res("recv(DONTWAIT) after", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));

	tell();                                 /* client: 300 bytes, 2 sends */
	n = recv(fd, buf, 100, MSG_PEEK | MSG_WAITALL);
	say("recv(PEEK|WAITALL, 100) >= 1: %s", yesno(n >= 1));
	n = recv(fd, buf, 300, MSG_WAITALL);
	res("recv(WAITALL, 300)", n);
	say("checksum ok: %s", yesno(n == 300 && ck(CK_INIT, buf, 300) == pattern_ck(300, 2)));

	tell();                                 /* client: 100 bytes, then SHUT_WR */
	n = recv(fd, buf, 200, MSG_WAITALL);
	res("recv(WAITALL, 200) hitting EOF", n);
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("recv(PEEK) at EOF", recv(fd, buf, sizeof(buf), MSG_PEEK));
	res("recv(WAITALL) at EOF", recv(fd, buf, sizeof(buf), MSG_WAITALL));
	res("close", close(fd));
	tell();
}

static void client(void)
{
	int fd = client_conn();
	char buf[1000];

	await_peer();
	res("send hello world", send(fd, "hello world", 11, 0));
	await_peer();
	for (int i = 0; i < 4; i++) {
		pattern(buf, 1000, (uint64_t)i * 1000, 1);
		if (send_all(fd, buf, 1000) != 1000)
			fatal("send");
		msleep(20);
	}
	say("sent 4 x 1000");
	tell();
	await_peer();
	pattern(buf, 300, 0, 2);
	res("send 100", send(fd, buf, 100, 0));
	msleep(30);
	res("send 200", send(fd, buf + 100, 200, 0));
	await_peer();
	pattern(buf, 100, 0, 3);
	res("send 100", send(fd, buf, 100, 0));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	await_peer();
	res("recv after peer close", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
