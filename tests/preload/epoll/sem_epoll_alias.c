/* SPDX-License-Identifier: MIT */
/* An epoll set is one open file description, whatever fd names it: a
 * registration made through one copy of the epoll fd is reported by a wait
 * through another (issue 11, item 1: mio dups its epoll fd with
 * F_DUPFD_CLOEXEC, registers through the copy and waits through the
 * original; the interposer returned its internal cookie as epoll_data and
 * tokio crashed).  Each round is one connection on which the server speaks
 * first ("hello"); the client registers and waits through different copies:
 * fcntl(F_DUPFD_CLOEXEC), dup, dup3 with the original closed before the
 * wait, dup2 over another epoll fd, and a copy received with SCM_RIGHTS
 * (the interposer never sees it made).  The last round is the server's:
 * it registers an accepted connection through a copy and waits through the
 * original for the client's bytes. */
#include "common.h"
#include <sys/epoll.h>

#define ROUNDS 7

static void report(const char *label, int n, struct epoll_event *ev)
{
	if (n < 0) {
		say("%s: epoll_wait = -1 %s", label, ename(errno));
		return;
	}
	if (n == 0) {
		say("%s: epoll_wait = 0", label);
		return;
	}
	say("%s: epoll_wait = %d data %llu events %s", label, n,
	    (unsigned long long)ev[0].data.u64, pmask((int)ev[0].events));
}

static void server(int lfd)
{
	for (int i = 0; i < ROUNDS - 1; i++) {
		int fd = server_conn(lfd);
		send_all(fd, "hello", 5);
		char buf[8];
		res("recv bye", recv_all(fd, buf, 3));
		close(fd);
	}
	/* the last round: ours to wait through another copy */
	int fd = server_conn(lfd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int ep2 = fcntl(ep, F_DUPFD_CLOEXEC, 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 }, out[4];
	res("ctl(copy)", epoll_ctl(ep2, EPOLL_CTL_ADD, fd, &ev));
	tell();                                 /* client: send "ping" */
	report("wait(original)", epoll_wait(ep, out, 4, 10000), out);
	char buf[8];
	res("recv", recv_all(fd, buf, 4));
	report("wait(copy) after the read", epoll_wait(ep2, out, 4, 0), out);
	close(ep);
	close(ep2);
	close(fd);
}

/* one client round: register through `reg`, wait through `wait` */
static void round_(const char *label, int reg, int wait_fd, uint64_t tag)
{
	int fd = client_conn();
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = tag }, out[4];
	char line[96];
	snprintf(line, sizeof(line), "%s: ctl", label);
	res(line, epoll_ctl(reg, EPOLL_CTL_ADD, fd, &ev));
	int n = epoll_wait(wait_fd, out, 4, 10000);
	snprintf(line, sizeof(line), "%s: wait", label);
	report(line, n, out);
	char buf[8] = { 0 };
	res("recv", recv_all(fd, buf, 5));
	say("data: %s", buf);
	/* edge-triggered, drained: nothing more through either copy */
	snprintf(line, sizeof(line), "%s: again", label);
	report(line, epoll_wait(wait_fd, out, 4, 0), out);
	report(line, epoll_wait(reg, out, 4, 0), out);
	send_all(fd, "bye", 3);
	close(fd);
}

static int recv_fd(int us)
{
	char b;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &b, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	if (recvmsg(us, &m, 0) != 1)
		fatal("recvmsg");
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		fatal("no fd");
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	return fd;
}

static void client(void)
{
	/* mio's pattern */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int ep2 = fcntl(ep, F_DUPFD_CLOEXEC, 0);
	round_("F_DUPFD_CLOEXEC copy / original", ep2, ep, 42);
	close(ep2);
	close(ep);

	/* dup: registered through the original, waited through the copy */
	ep = epoll_create1(0);
	ep2 = dup(ep);
	round_("original / dup copy", ep, ep2, 43);
	close(ep2);
	close(ep);

	/* dup3 to a number of our choosing; the original closed first */
	ep = epoll_create1(0);
	ep2 = dup3(ep, 200, O_CLOEXEC);
	res("dup3", ep2);
	close(ep);
	round_("dup3 copy, original closed", ep2, ep2, 44);
	close(ep2);

	/* registered through the original, which is then closed: the
	 * registration lives as long as the set (the copy) does */
	ep = epoll_create1(0);
	ep2 = dup(ep);
	{
		int fd = client_conn();
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 45 }, out[4];
		res("registered, original closed: ctl", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
		close(ep);
		report("registered, original closed: wait(copy)", epoll_wait(ep2, out, 4, 10000),
		       out);
		char buf[8] = { 0 };
		res("recv", recv_all(fd, buf, 5));
		say("data: %s", buf);
		send_all(fd, "bye", 3);
		close(fd);
	}
	close(ep2);

	/* dup2 over another epoll set: the target names the source's set */
	ep = epoll_create1(0);
	int other = epoll_create1(0);
	res("dup2", dup2(ep, other) == other);
	round_("original / dup2 over another set", ep, other, 46);
	close(other);
	close(ep);

	/* a copy received with SCM_RIGHTS: made where the interposer does not
	 * see it */
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		fatal("socketpair");
	ep = epoll_create1(0);
	if (send_fd(sp[0], ep) != 1)
		fatal("sendmsg");
	ep2 = recv_fd(sp[1]);
	round_("original / SCM_RIGHTS copy", ep, ep2, 47);
	close(ep2);
	close(ep);
	close(sp[0]);
	close(sp[1]);

	/* the server's round */
	int fd = client_conn();
	await_peer();
	send_all(fd, "ping", 4);
	char buf[8];
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	close(fd);
}

int main(void)
{
	return run(server, client);
}
