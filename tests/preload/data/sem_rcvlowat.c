/* SPDX-License-Identifier: MIT */
/* SO_RCVLOWAT: poll and epoll report POLLIN only from that many bytes on (or
 * at the end of the stream); a blocking recv waits for that many (no more
 * than it asked for), or returns what there is when SO_RCVTIMEO expires.
 * The server looks once the client's bytes have arrived (FIONREAD reaching
 * their count, poll for the FIN), not after a fixed time; the client sends
 * the 30 and the 80 once the server sleeps in its recv(200). */
#include "common.h"
#include <sys/epoll.h>

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[4096];
	int v = 100;

	res("setsockopt(SO_RCVLOWAT, 100)", setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)));
	socklen_t vl = sizeof(v);
	res("getsockopt(SO_RCVLOWAT)", getsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &vl));
	say("SO_RCVLOWAT %d", v);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 }, out[2];
	res("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	tell();
	await_peer();                           /* client sent 60 */
	wait_inq(fd, 60);
	poll1("60 bytes waiting", fd, POLLIN, 0);
	res("epoll_wait with 60", epoll_wait(ep, out, 2, 0));
	res("recv(DONTWAIT) below the mark", recv(fd, buf, 10, MSG_DONTWAIT));
	tell();
	await_peer();                           /* client sent 50 more: 100 */
	wait_inq(fd, 100);
	poll1("100 bytes waiting", fd, POLLIN, 0);
	res("epoll_wait with 100", epoll_wait(ep, out, 2, 0));
	res("recv(DONTWAIT) the 100", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	tell();                                 /* client: 30 and 80, while we sleep */
	res("blocking recv(200) waits for the mark", recv(fd, buf, 200, 0));
	tell();                                 /* client sends 20 */
	await_peer();
	wait_inq(fd, 20);
	res("recv(15) with 20 there takes 15", recv(fd, buf, 15, 0));
	res("recv(DONTWAIT) the rest", recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
	struct timeval tv = { 0, 150000 };
	res("setsockopt(SO_RCVTIMEO 150 ms)", setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	tell();                                 /* client sends 10 */
	await_peer();
	wait_inq(fd, 10);
	res("recv(200) times out with 10 waiting", recv(fd, buf, 200, 0));
	tell();                                 /* client sends 5, shuts down */
	await_peer();
	wait_ev(fd, POLLRDHUP);
	poll1("5 bytes and EOF", fd, POLLIN, 0);
	res("recv at the end", recv(fd, buf, 200, 0));
	res("recv EOF", recv(fd, buf, 200, 0));
	close(ep);
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	char buf[256];

	memset(buf, 'x', sizeof(buf));
	await_peer();
	res("send 60", send_all(fd, buf, 60));
	tell();
	await_peer();
	res("send 50", send_all(fd, buf, 50));
	tell();
	await_peer();
	await_peer_asleep();                    /* in its recv(200) */
	res("send 30", send_all(fd, buf, 30));
	msleep(100);                            /* apart (the outcome does not depend on it) */
	res("send 80", send_all(fd, buf, 80));
	await_peer();
	res("send 20", send_all(fd, buf, 20));
	tell();
	await_peer();
	res("send 10", send_all(fd, buf, 10));
	tell();
	await_peer();
	res("send 5", send_all(fd, buf, 5));
	res("shutdown", shutdown(fd, SHUT_WR));
	tell();
	close(fd);
}

int main(void)
{
	return run(server, client);
}
