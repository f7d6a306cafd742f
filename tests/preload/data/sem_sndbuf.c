/* SPDX-License-Identifier: MIT */
/* SO_SNDBUF and SO_RCVBUF bound what a nonblocking writer can queue ahead of
 * a reader that does not read.  Default buffers take well over 256 KiB; a
 * writer with SO_SNDBUF 16384 (with the reader's SO_RCVBUF left alone, set
 * on the accepted socket, or set on the listener before the connection)
 * gets EAGAIN far below that.  getsockopt reports the doubled values.  What
 * was queued all arrives, intact, and the writer is writable again. */
#include "common.h"

#define LIMIT (256u << 10)

enum { RCV_DEFAULT, RCV_ACCEPTED, RCV_LISTENER };

static void server_case(int lfd, int rcv, const char *what)
{
	int v = 16384;
	socklen_t vl = sizeof(v);

	if (rcv == RCV_LISTENER)
		res("setsockopt(listener, SO_RCVBUF, 16384)",
		    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)));
	tell();                                 /* client: connect */
	int fd = server_conn(lfd);
	if (rcv == RCV_ACCEPTED)
		res("setsockopt(SO_RCVBUF, 16384)", setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)));
	if (rcv != RCV_DEFAULT) {
		res("getsockopt(SO_RCVBUF)", getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &vl));
		say("SO_RCVBUF is %d", v);
	}
	tell();                                 /* client: fill */
	size_t n = (size_t)await_u64(), got = 0;
	uint64_t h = recv_count(fd, n, &got);
	say("%s: drained all the writer queued, intact: %s", what,
	    yesno(got == n && h == pattern_ck(n, 9)));
	tell();
	await_peer();                           /* the client closed */
	char c;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	poll(&p, 1, 1000);
	res("then recv at EOF", recv(fd, &c, 1, MSG_DONTWAIT));
	close(fd);
}

static void client_case(int sndbuf, const char *what)
{
	static char buf[4096];
	int v = sndbuf;
	socklen_t vl = sizeof(v);

	await_peer();
	int fd = client_conn();
	if (sndbuf) {
		res("setsockopt(SO_SNDBUF, 16384)", setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)));
		res("getsockopt(SO_SNDBUF)", getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &vl));
		say("SO_SNDBUF is %d", v);
	}
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		fatal("fcntl");
	await_peer();
	size_t total = 0;
	ssize_t w;
	for (;;) {
		pattern(buf, sizeof(buf), total, 9);
		w = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
		if (w <= 0)
			break;
		if ((size_t)w < sizeof(buf)) {  /* keep the stream a pattern */
			total += (size_t)w;
			continue;
		}
		total += (size_t)w;
		if (total > (64u << 20))
			break;
	}
	say("%s: filling ends in EAGAIN: %s", what, yesno(w < 0 && errno == EAGAIN));
	say("%s: queued more than 0: %s", what, yesno(total > 0));
	if (sndbuf)
		say("%s: queued below 256 KiB: %s", what, yesno(total < LIMIT));
	else
		say("%s: queued more than 256 KiB: %s", what, yesno(total > LIMIT));
	poll1("right after EAGAIN", fd, POLLOUT, 0);
	tell_u64(total);
	await_peer();                           /* the server drained it all */
	poll1("after the reader drained", fd, POLLOUT, 1000);
	close(fd);
	tell();
}

static void server(int lfd)
{
	server_case(lfd, RCV_DEFAULT, "(a) default buffers");
	server_case(lfd, RCV_DEFAULT, "(b) SO_SNDBUF only");
	server_case(lfd, RCV_ACCEPTED, "(c) SO_SNDBUF, SO_RCVBUF on the accepted socket");
	server_case(lfd, RCV_LISTENER, "(d) SO_SNDBUF, SO_RCVBUF on the listener");
}

static void client(void)
{
	client_case(0, "(a) default buffers");
	client_case(16384, "(b) SO_SNDBUF only");
	client_case(16384, "(c) SO_SNDBUF, SO_RCVBUF on the accepted socket");
	client_case(16384, "(d) SO_SNDBUF, SO_RCVBUF on the listener");
}

int main(void)
{
	return run(server, client);
}
