/* SPDX-License-Identifier: MIT */
/* Nonblocking connect: 0 or EINPROGRESS, POLLOUT, SO_ERROR 0, data both
 * ways (the client writes first and waits in poll).  Then a nonblocking
 * connect to a port nobody listens on: SO_ERROR ECONNREFUSED. */
#include "common.h"

static void server(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	char buf[64];
	if (fd < 0)
		fatal("accept");
	ssize_t n = recv_all(fd, buf, 4);
	res("recv ping", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("send pong", send(fd, "pong", 4, 0));
	n = recv_all(fd, buf, 6);
	res("recv second", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));

	/* a second connection: socket(SOCK_NONBLOCK) */
	fd = accept(lfd, NULL, NULL);
	n = recv_all(fd, buf, 5);
	say("second connection got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("send", send(fd, "there", 5, 0));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

static void client(void)
{
	struct sockaddr_in a = t_addr();
	char buf[64];
	int err = -1;
	socklen_t l = sizeof(err);

	int fd = socket(AF_INET, SOCK_STREAM, 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	say("in progress or connected: %s", yesno(rc == 0 || errno == EINPROGRESS));
	poll1("connecting", fd, POLLOUT, 5000);
	res("getsockopt(SO_ERROR)", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l));
	say("SO_ERROR = %s", err ? ename(err) : "0");
	res("connect again", connect(fd, (struct sockaddr *)&a, sizeof(a)));
	res("send ping", send(fd, "ping", 4, 0));
	poll1("waiting for pong", fd, POLLIN, 5000);
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	res("recv", n);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("recv on empty", recv(fd, buf, sizeof(buf), 0));
	res("send second", send(fd, "second", 6, 0));
	res("close", close(fd));

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	say("in progress or connected: %s", yesno(rc == 0 || errno == EINPROGRESS));
	poll1("connecting", fd, POLLOUT, 5000);
	res("send", send(fd, "hello", 5, 0));
	poll1("waiting for reply", fd, POLLIN, 5000);
	n = recv(fd, buf, sizeof(buf), 0);
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	res("close", close(fd));

	/* refused: a bound port nobody listens on */
	int dead = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in d = { .sin_family = AF_INET };
	d.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t dl = sizeof(d);
	if (bind(dead, (struct sockaddr *)&d, sizeof(d)) < 0 ||
	    getsockname(dead, (struct sockaddr *)&d, &dl) < 0)
		fatal("bind");
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	rc = connect(fd, (struct sockaddr *)&d, sizeof(d));
	say("refused connect: in progress or refused: %s",
	    yesno(rc < 0 && (errno == EINPROGRESS || errno == ECONNREFUSED)));
	poll1("refused connect", fd, POLLOUT, 5000);
	l = sizeof(err);
	res("getsockopt(SO_ERROR)", getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l));
	say("SO_ERROR = %s", err ? ename(err) : "0");
	res("send", send(fd, "x", 1, MSG_NOSIGNAL));
	res("close", close(fd));
	close(dead);
}

int main(void)
{
	return run(server, client);
}
