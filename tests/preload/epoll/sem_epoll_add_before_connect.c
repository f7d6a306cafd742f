/* SPDX-License-Identifier: MIT */
/* A socket added to an epoll set before connect(), as event loops do:
 * nginx's upstream connect (ADD IN|OUT|RDHUP|ET, a non-blocking connect,
 * the request written on EPOLLOUT, the reply read on EPOLLIN), Netty's
 * channel (ADD with no interest at creation, a wait before connect
 * reporting the fresh socket's hang-up, MOD to OUT while connecting, MOD
 * to IN once connected), a blocking connect with a level-triggered
 * registration, DEL and ADD again after connect, a registration that a
 * MOD changes before connect, and one socket in two sets.  Under the
 * interposer the registration was the kernel socket's only: the reply,
 * in the ring, was never reported (the wait timed out). */
#include "epoll_common.h"

#define NCONN 6
#define WAIT_MS 3000            /* an event due: a hang guard, not a deadline */

/* each connection: the request, the reply, then EOF */
static void server(int lfd)
{
	serve_requests(lfd, NCONN);
}

static int new_socket(bool nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		fatal("socket");
	return fd;
}

/* nginx's ngx_event_connect_peer: ADD before connect, write on OUT */
static void nginx_upstream(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(true);
	ctl("nginx: ADD IN|OUT|RDHUP|ET before connect", ep, EPOLL_CTL_ADD, fd,
	    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
	connect_said(fd);
	wait_report(ep, "nginx: connected", WAIT_MS);
	res("nginx: send request", send(fd, "hello", 5, 0));
	wait_report(ep, "nginx: reply", WAIT_MS);
	get_reply(fd);
	wait_report(ep, "nginx: nothing new", 100);
	close(fd);
	close(ep);
}

/* Netty's epoll channel: registered at creation with no interest, OUT
 * while connecting, IN once connected */
static void netty_channel(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(true);
	ctl("netty: ADD ET at creation", ep, EPOLL_CTL_ADD, fd, EPOLLET, 2);
	wait_report(ep, "netty: fresh socket", 100);
	connect_said(fd);
	ctl("netty: MOD OUT|ET", ep, EPOLL_CTL_MOD, fd, EPOLLOUT | EPOLLET, 2);
	wait_report(ep, "netty: connected", WAIT_MS);
	ctl("netty: MOD IN|RDHUP|ET", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP | EPOLLET, 2);
	res("netty: send request", send(fd, "hello", 5, 0));
	wait_report(ep, "netty: reply", WAIT_MS);
	get_reply(fd);
	wait_report(ep, "netty: nothing new", 100);
	close(fd);
	close(ep);
}

/* a blocking connect; a level-triggered registration */
static void blocking_connect(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(false);
	ctl("blocking: ADD IN before connect", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 3);
	connect_said(fd);
	wait_report(ep, "blocking: connected, idle", 100);
	res("blocking: send request", send(fd, "hello", 5, 0));
	wait_report(ep, "blocking: reply", WAIT_MS);
	wait_report(ep, "blocking: reply still there (level)", WAIT_MS);
	get_reply(fd);
	wait_report(ep, "blocking: drained", 100);
	close(fd);
	close(ep);
}

/* DEL after connect, then ADD again */
static void del_add(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(true);
	ctl("del/add: ADD OUT before connect", ep, EPOLL_CTL_ADD, fd, EPOLLOUT, 4);
	connect_said(fd);
	wait_report(ep, "del/add: connected", WAIT_MS);
	ctl("del/add: DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("del/add: DEL again", ep, EPOLL_CTL_DEL, fd, 0, 0);
	res("del/add: send request", send(fd, "hello", 5, 0));
	wait_ev(fd, POLLIN);
	wait_report(ep, "del/add: deleted, reply there", 100);
	ctl("del/add: ADD IN", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 5);
	ctl("del/add: ADD twice", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 5);
	wait_report(ep, "del/add: reply", WAIT_MS);
	get_reply(fd);
	close(fd);
	close(ep);
}

/* MOD, and DEL then ADD, before connect; the registration's data too */
static void mod_before(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(true);
	ctl("mod: ADD IN before connect", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 6);
	ctl("mod: DEL before connect", ep, EPOLL_CTL_DEL, fd, 0, 0);
	ctl("mod: MOD unregistered", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 6);
	ctl("mod: ADD IN|ET before connect", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 7);
	ctl("mod: ADD twice", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 7);
	ctl("mod: MOD IN|OUT before connect", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT, 8);
	connect_said(fd);
	wait_report(ep, "mod: connected", WAIT_MS);
	ctl("mod: MOD IN", ep, EPOLL_CTL_MOD, fd, EPOLLIN, 9);
	res("mod: send request", send(fd, "hello", 5, 0));
	wait_report(ep, "mod: reply", WAIT_MS);
	get_reply(fd);
	wait_report(ep, "mod: drained", 100);
	close(fd);
	close(ep);
}

/* one socket in two sets before connect: each reports the reply */
static void two_sets(void)
{
	int ep1 = epoll_create1(EPOLL_CLOEXEC), ep2 = epoll_create1(EPOLL_CLOEXEC);
	int fd = new_socket(true);
	ctl("two sets: ADD IN to the first", ep1, EPOLL_CTL_ADD, fd, EPOLLIN, 10);
	ctl("two sets: ADD IN|OUT|ET to the second", ep2, EPOLL_CTL_ADD, fd,
	    EPOLLIN | EPOLLOUT | EPOLLET, 11);
	connect_said(fd);
	wait_report(ep2, "two sets: second, connected", WAIT_MS);
	wait_report(ep1, "two sets: first, idle", 100);
	res("two sets: send request", send(fd, "hello", 5, 0));
	wait_report(ep1, "two sets: first, reply", WAIT_MS);
	wait_report(ep2, "two sets: second, reply", WAIT_MS);
	get_reply(fd);
	wait_report(ep1, "two sets: first, drained", 100);
	close(ep1);
	wait_report(ep2, "two sets: second, nothing new", 100);
	close(fd);
	close(ep2);
}

static void client(void)
{
	nginx_upstream();
	netty_channel();
	blocking_connect();
	del_add();
	mod_before();
	two_sets();
}

int main(void)
{
	return run(server, client);
}
