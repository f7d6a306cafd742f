/* SPDX-License-Identifier: MIT */
/* shutdown(SHUT_WR): the peer drains then reads 0 (repeatably), can still
 * send and be read; send after one's own SHUT_WR is EPIPE; after the peer's
 * close recv returns 0; poll masks along the way. */
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	size_t got;
	uint64_t h;

	await_peer();                           /* client sent 500, SHUT_WR */
	poll1("after peer SHUT_WR", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	h = recv_count(fd, 100000, &got);
	say("received %zu bytes, checksum ok: %s", got, yesno(h == pattern_ck(500, 4)));
	char b[16];
	res("recv at EOF", recv(fd, b, sizeof(b), 0));
	res("recv at EOF again", recv(fd, b, sizeof(b), MSG_DONTWAIT));
	h = send_pattern(fd, 70000, 5);
	say("sent 70000 after peer's SHUT_WR");
	tell();
	await_peer();                           /* client read them */
	res("shutdown(SHUT_RD)", shutdown(fd, SHUT_RD));
	res("close", close(fd));
	tell();
	(void)h;
}

static void client(void)
{
	int fd = client_conn();
	size_t got;
	uint64_t h;
	char b[16];

	send_pattern(fd, 500, 4);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	poll1("after own SHUT_WR", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	res("send after own SHUT_WR (NOSIGNAL)", send(fd, "x", 1, MSG_NOSIGNAL));
	tell();
	await_peer();
	h = recv_count(fd, 70000, &got);
	say("received %zu bytes, checksum ok: %s", got, yesno(h == pattern_ck(70000, 5)));
	res("recv(DONTWAIT) before peer close", recv(fd, b, sizeof(b), MSG_DONTWAIT));
	tell();
	await_peer();                           /* server closed */
	poll1("after peer close", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	res("recv after peer close", recv(fd, b, sizeof(b), 0));
	res("recv again", recv(fd, b, sizeof(b), 0));
	res("shutdown(SHUT_RDWR)", shutdown(fd, SHUT_RDWR));
	res("close", close(fd));
	res("close again", close(fd));
}

int main(void)
{
	return run(server, client);
}
