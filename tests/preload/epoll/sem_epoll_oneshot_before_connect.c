/* SPDX-License-Identifier: MIT */
/* EPOLLONESHOT on a socket added to an epoll set before connect(): the
 * connect's completion fires it, it stays disabled until a MOD re-arms it
 * for the reply (level and edge-triggered); one that fired before connect
 * (a fresh socket reports OUT|HUP) stays disabled across the connect until
 * MOD; one re-armed before connect.  Under the interposer the registration
 * stayed the kernel socket's: the reply, in the ring, was never reported. */
#include "epoll_common.h"

#define NCONN 4
#define WAIT_MS 3000            /* an event due: a hang guard, not a deadline */

static void server(int lfd)
{
	serve_requests(lfd, NCONN);
}

/* ADD OUT|ONESHOT before connect (flags: EPOLLET or 0), MOD IN|ONESHOT */
static void oneshot(const char *name, uint32_t flags, uint64_t tag)
{
	char l[128];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	snprintf(l, sizeof(l), "%s: ADD OUT|ONESHOT before connect", name);
	ctl(l, ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLONESHOT | flags, tag);
	connect_said(fd);
	snprintf(l, sizeof(l), "%s: connected", name);
	wait_report(ep, l, WAIT_MS);
	snprintf(l, sizeof(l), "%s: disabled", name);
	wait_report(ep, l, 100);
	res("send request", send(fd, "hello", 5, 0));
	wait_ev(fd, POLLIN);
	snprintf(l, sizeof(l), "%s: disabled, the reply there", name);
	wait_report(ep, l, 100);
	snprintf(l, sizeof(l), "%s: MOD IN|ONESHOT", name);
	ctl(l, ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT | flags, tag + 1);
	snprintf(l, sizeof(l), "%s: re-armed, reply", name);
	wait_report(ep, l, WAIT_MS);
	snprintf(l, sizeof(l), "%s: disabled again", name);
	wait_report(ep, l, 100);
	get_reply(fd);
	close(fd);
	close(ep);
}

/* fired by the fresh socket's OUT|HUP before connect: disabled across it */
static void fired_before(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ctl("fired before: ADD IN|OUT|ONESHOT", ep, EPOLL_CTL_ADD, fd,
	    EPOLLIN | EPOLLOUT | EPOLLONESHOT, 5);
	wait_report(ep, "fired before: fresh socket", WAIT_MS);
	connect_said(fd);
	wait_ev(fd, POLLOUT);
	wait_report(ep, "fired before: connected, still disabled", 100);
	res("send request", send(fd, "hello", 5, 0));
	wait_ev(fd, POLLIN);
	wait_report(ep, "fired before: the reply there, still disabled", 100);
	ctl("fired before: MOD IN|ONESHOT", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 6);
	wait_report(ep, "fired before: re-armed, reply", WAIT_MS);
	wait_report(ep, "fired before: disabled again", 100);
	get_reply(fd);
	close(fd);
	close(ep);
}

/* fired before connect and re-armed by a MOD before it */
static void rearmed_before(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ctl("re-armed before: ADD OUT|ONESHOT", ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLONESHOT, 7);
	wait_report(ep, "re-armed before: fresh socket", WAIT_MS);
	ctl("re-armed before: MOD IN|ONESHOT", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 8);
	connect_said(fd);
	wait_ev(fd, POLLOUT);
	res("send request", send(fd, "hello", 5, 0));
	wait_report(ep, "re-armed before: reply", WAIT_MS);
	wait_report(ep, "re-armed before: disabled", 100);
	get_reply(fd);
	close(fd);
	close(ep);
}

static void client(void)
{
	oneshot("level", 0, 1);
	oneshot("edge", EPOLLET, 3);
	fired_before();
	rearmed_before();
}

int main(void)
{
	return run(server, client);
}
