/* SPDX-License-Identifier: MIT */
// expect: tcp
/* Registrations made before a socket is a connection, whose peer is a plain
 * program (python3, LD_PRELOAD removed), so that the connection stays on
 * TCP after the registration: an accepted socket added before its first
 * use (its claim finds no offer), and a fresh socket added before it
 * connects to the plain program's listener (no accelerated listener: the
 * record of it goes, the kernel's set keeps it).  Both report exactly what
 * kernel TCP does, EPOLLET included. */
#include "epoll_common.h"

#define WAIT_MS 3000            /* an event due: a hang guard, not a deadline */

static void get(int fd, const char *what)
{
	char buf[64];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		say("%s: recv = -1 %s", what, ename(errno));
	else
		say("%s: recv = %zd \"%.*s\"", what, n, (int)n, buf);
}

static void server(int lfd)
{
	char buf[64];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	ctl("accepted: ADD IN|OUT|RDHUP|ET before its first use", ep, EPOLL_CTL_ADD, fd,
	    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
	wait_report(ep, "accepted: writable", WAIT_MS);
	res("accepted: send go", send(fd, "go", 2, 0));
	wait_report(ep, "accepted: the client's port", WAIT_MS);
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	if (n <= 0)
		fatal("recv port");
	buf[n] = 0;
	say("accepted: got the client's port");

	/* to the plain program's own listener */
	struct sockaddr_in a = t_addr();
	a.sin_port = htons((uint16_t)atoi(buf));
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ctl("fresh: ADD IN|OUT|RDHUP|ET before connect", ep, EPOLL_CTL_ADD, c,
	    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 2);
	int rc = connect(c, (struct sockaddr *)&a, sizeof(a));
	say("fresh: connect: %s", rc == 0 ? "0" : errno == EINPROGRESS ? "EINPROGRESS" : ename(errno));
	wait_report(ep, "fresh: connected", WAIT_MS);
	res("fresh: send request", send(c, "hello", 5, 0));
	wait_ev(c, POLLRDHUP);          /* (the reply and the end: one report) */
	wait_report(ep, "fresh: reply and EOF", WAIT_MS);
	get(c, "fresh");
	get(c, "fresh");
	ctl("fresh: MOD IN", ep, EPOLL_CTL_MOD, c, EPOLLIN, 3);
	wait_report(ep, "fresh: at EOF (level)", WAIT_MS);
	ctl("fresh: DEL", ep, EPOLL_CTL_DEL, c, 0, 0);
	close(c);
	res("accepted: send bye", send(fd, "bye", 3, 0));
	wait_report(ep, "accepted: EOF", WAIT_MS);
	get(fd, "accepted");
	close(fd);
	close(ep);
}

static const char py[] =
	"import socket, sys\n"
	"l = socket.socket()\n"
	"l.bind(('127.0.0.1', 0))\n"
	"l.listen(1)\n"
	"s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
	"print('client: got %r' % s.recv(10))\n"
	"s.sendall(b'%d' % l.getsockname()[1])\n"
	"c, _ = l.accept()\n"
	"print('client: its connection got %r' % c.recv(10))\n"
	"c.sendall(b'world')\n"
	"c.close()\n"
	"print('client: got %r' % s.recv(10))\n"
	"s.close()\n";

static void client(void)
{
	char port[16];
	snprintf(port, sizeof(port), "%u", (unsigned)t_port);
	char *argv[] = { "python3", "-u", "-c", (char *)py, port, NULL };
	exec_python(argv, false);
}

int main(void)
{
	return run(server, client);
}
