/* SPDX-License-Identifier: MIT */
/* EPOLLET with EPOLLOUT reports room only when the kernel's would: after a
 * send ran out of it (SOCK_NOSPACE), not each time the peer reads what we
 * sent (under the interposer, the peer's read publishing its cursor was an
 * edge: an nginx upstream saw EPOLLOUT before the reply), and not when a
 * client's connection settles on shared memory after its connect's
 * completion was reported (the settle was an edge too). */
#include "epoll_common.h"

#define WAIT_MS 3000            /* an event due: a hang guard, not a deadline */
#define IDLE_MS 300             /* nothing is due: what comes is wrong */

static void server(int lfd)
{
	char buf[65536];
	int fd = server_conn(lfd);

	/* the peer's reads */
	await_peer();
	ssize_t n = recv_all(fd, buf, 5);
	say("read the request: %zd", n);
	tell();
	await_peer();
	res("send reply", send(fd, "world", 5, 0));

	/* a send that runs out of room */
	uint64_t sent = await_u64();
	size_t got;
	recv_count(fd, sent, &got);
	say("drained what the client sent: %s", yesno(got == sent));
	tell();
	await_peer();
	close(fd);

	/* a connection that settles after its connect's completion was
	 * reported: it is used (claimed) once told */
	fd = accept(lfd, NULL, NULL);
	await_peer();
	res("recv(DONTWAIT) before anything was sent", recv(fd, buf, 1, MSG_DONTWAIT));
	tell();
	await_peer();
	n = recv_all(fd, buf, 5);
	say("read the request: %zd", n);
	res("send reply", send(fd, "world", 5, 0));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	close(fd);
}

static void client(void)
{
	char buf[16384];
	int fd = client_conn();
	int ep = epoll_create1(EPOLL_CLOEXEC);
	ctl("ADD IN|OUT|RDHUP|ET", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
	wait_report(ep, "writable", WAIT_MS);
	res("send request", send(fd, "hello", 5, 0));
	tell();
	await_peer();
	wait_report(ep, "the peer read it: no news", IDLE_MS);
	tell();
	wait_report(ep, "reply", WAIT_MS);
	drain("reply", fd);

	/* fill: room is news once it comes back */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	uint64_t sent = 0;
	ssize_t k;
	memset(buf, 'x', sizeof(buf));
	while ((k = send(fd, buf, sizeof(buf), 0)) > 0)
		sent += (uint64_t)k;
	say("sent until %s", ename(errno));
	tell_u64(sent);
	await_peer();
	wait_report(ep, "drained: room", WAIT_MS);
	wait_report(ep, "no news", IDLE_MS);
	tell();
	close(fd);
	close(ep);

	/* registered while pending: the connect's completion, then the
	 * settle on shared memory, which is no news */
	ep = epoll_create1(EPOLL_CLOEXEC);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = t_addr();
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	say("connect: %s", rc == 0 ? "0" : errno == EINPROGRESS ? "EINPROGRESS" : ename(errno));
	ctl("ADD IN|OUT|RDHUP|ET", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 2);
	wait_report(ep, "connected", WAIT_MS);
	tell();
	await_peer();
	wait_report(ep, "the server used it: no news", IDLE_MS);
	res("send request", send(fd, "hello", 5, 0));
	tell();
	wait_report(ep, "reply", WAIT_MS);
	drain("reply", fd);
	wait_report(ep, "no news", IDLE_MS);
	close(fd);
	close(ep);
}

int main(void)
{
	return run(server, client);
}
