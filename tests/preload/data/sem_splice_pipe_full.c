/* SPDX-License-Identifier: MIT */
/* splice() from a socket into a pipe that cannot take it all: the kernel
 * takes from the socket only what the pipe accepted.  The server sends
 * 50000 bytes; the client's pipe is 4 KiB (F_SETPIPE_SZ): a splice of
 * 64 KiB moves some (how much is the transport's), and exactly that much
 * left the socket (FIONREAD); with the pipe full, SPLICE_F_NONBLOCK or a
 * pipe with O_NONBLOCK gives EAGAIN and the socket keeps every byte; the
 * rest goes through the pipe, each byte checked.  sendfile() from the
 * socket into the pipe does the same.  SPLICE_F_NONBLOCK is the pipe's
 * flag: on an empty blocking socket splice waits all the same (until the
 * server sends, once the client sleeps), with SO_RCVTIMEO until the
 * timeout.  A pipe nobody reads: EPIPE and SIGPIPE, the socket keeping
 * its bytes.  At the end of the stream: 0. */
#include "common.h"
#include <sys/sendfile.h>

#define SEED 5
#define FIRST 50000
#define SECOND 3000

static void server(int lfd)
{
	int fd = server_conn(lfd);
	static char buf[FIRST + SECOND];
	pattern(buf, sizeof(buf), 0, SEED);
	if (send_all(fd, buf, FIRST) != FIRST)
		fatal("send");
	tell();
	await_peer();
	if (send_all(fd, buf + FIRST, SECOND) != SECOND)
		fatal("send");
	tell();
	await_peer();
	tell();
	await_peer_asleep();                    /* in its splice */
	res("send 4", send(fd, "late", 4, 0));
	await_peer();
	res("send 4", send(fd, "more", 4, 0));
	tell();
	await_peer();
	res("close", close(fd));
	tell();
}

static uint64_t got;                    /* the stream's bytes the client has */
static bool ok = true;

/* what the pipe holds is the stream's next bytes */
static void take(int p0)
{
	static char buf[65536], want[65536];
	ssize_t n = read(p0, buf, sizeof(buf));
	if (n <= 0)
		fatal("pipe read");
	pattern(want, (size_t)n, got, SEED);
	ok = ok && !memcmp(buf, want, (size_t)n);
	got += (uint64_t)n;
}

static void client(void)
{
	count_sigpipes();
	int fd = client_conn();
	int p[2];
	if (pipe(p) < 0)
		fatal("pipe");
	res("F_SETPIPE_SZ 4096", fcntl(p[1], F_SETPIPE_SZ, 4096));
	await_peer();
	wait_inq(fd, FIRST);

	ssize_t n = splice(fd, NULL, p[1], NULL, 65536, SPLICE_F_NONBLOCK);
	say("splice 64 KiB into the 4 KiB pipe moved some: %s", yesno(n > 0 && n <= 4096));
	say("the socket holds the rest: %s", yesno(readable_bytes(fd) == FIRST - n));
	int left = readable_bytes(fd);
	res("splice into the full pipe, SPLICE_F_NONBLOCK",
	    splice(fd, NULL, p[1], NULL, 65536, SPLICE_F_NONBLOCK));
	say("the socket holds as much: %s", yesno(readable_bytes(fd) == left));
	int fl = fcntl(p[1], F_GETFL);
	fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
	res("splice into the full pipe, O_NONBLOCK pipe", splice(fd, NULL, p[1], NULL, 65536, 0));
	say("the socket holds as much: %s", yesno(readable_bytes(fd) == left));
	fcntl(p[1], F_SETFL, fl);
	take(p[0]);
	while (got < FIRST) {
		n = splice(fd, NULL, p[1], NULL, 65536, 0);
		if (n <= 0 || readable_bytes(fd) != FIRST - (int)got - n)
			fatal("splice: %zd", n);
		take(p[0]);
	}
	say("all %d through the 4 KiB pipe, in order: %s", FIRST, yesno(ok));

	tell();
	await_peer();
	wait_inq(fd, SECOND);
	res("sendfile into the pipe with an offset", ({
		off_t off = 0;
		sendfile(p[1], fd, &off, 10);
	}));
	while (got < FIRST + SECOND) {
		n = sendfile(p[1], fd, NULL, 65536);
		if (n <= 0 || readable_bytes(fd) != FIRST + SECOND - (int)got - n)
			fatal("sendfile: %zd", n);
		take(p[0]);
	}
	say("all %d by sendfile through the pipe, in order: %s", SECOND, yesno(ok));

	/* nothing to read: it waits, SPLICE_F_NONBLOCK or not */
	tell();
	await_peer();
	char buf[16];
	res("splice on the empty socket, SPLICE_F_NONBLOCK",
	    splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	n = read(p[0], buf, sizeof(buf));
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	struct timeval tv = { 0, 100000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	res("splice on the empty socket, SO_RCVTIMEO", splice(fd, NULL, p[1], NULL, 100, 0));
	tv.tv_usec = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	/* a pipe nobody reads */
	tell();
	await_peer();
	wait_inq(fd, 4);
	int q[2];
	if (pipe(q) < 0)
		fatal("pipe");
	close(q[0]);
	res("splice into a pipe without readers", splice(fd, NULL, q[1], NULL, 100, 0));
	say("SIGPIPE count %d, the socket holds %d", (int)sigpipes, readable_bytes(fd));
	close(q[1]);
	res("splice 100", splice(fd, NULL, p[1], NULL, 100, 0));
	n = read(p[0], buf, sizeof(buf));
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);

	tell();
	await_peer();                           /* the server closed */
	res("splice at the end of the stream", splice(fd, NULL, p[1], NULL, 100, 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
