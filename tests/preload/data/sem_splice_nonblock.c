/* SPDX-License-Identifier: MIT */
/* splice() from a nonblocking socket into a pipe with SPLICE_F_NONBLOCK,
 * as Go's io.Copy does: nothing waits, so the bytes are tried first and
 * the pipe asked only if they did not move.  The kernel's order must
 * still show: data and room move data; an empty socket is EAGAIN; a full
 * pipe is EAGAIN with the socket keeping every byte, whether the socket
 * has data or not; a pipe nobody reads is EPIPE with exactly one SIGPIPE,
 * with data in the socket or without, the socket keeping its bytes; at
 * the end of the stream 0, or EAGAIN when the pipe is full.  The same
 * pipe again and again, then a new pipe in the same fd numbers. */
#include "common.h"

#define SEED 7
#define FIRST 3000

static void server(int lfd)
{
	int fd = server_conn(lfd);
	static char buf[FIRST];
	pattern(buf, sizeof(buf), 0, SEED);
	await_peer();
	if (send_all(fd, buf, FIRST) != FIRST)
		fatal("send");
	tell();
	await_peer();
	res("send 4", send(fd, "last", 4, 0));
	res("shutdown", shutdown(fd, SHUT_WR));
	tell();
	await_peer();
	res("close", close(fd));
}

static uint64_t got;
static bool ok = true;

static void take(int p0, size_t max)
{
	static char buf[65536], want[65536];
	ssize_t n = read(p0, buf, max < sizeof(buf) ? max : sizeof(buf));
	if (n <= 0)
		fatal("pipe read");
	pattern(want, (size_t)n, got, SEED);
	ok = ok && !memcmp(buf, want, (size_t)n);
	got += (uint64_t)n;
}

/* fill the pipe to the brim */
static void fill(int w)
{
	static char junk[4096];
	int fl = fcntl(w, F_GETFL);
	fcntl(w, F_SETFL, fl | O_NONBLOCK);
	while (write(w, junk, sizeof(junk)) > 0)
		;
	while (write(w, junk, 1) > 0)
		;
	fcntl(w, F_SETFL, fl);
}

static void drain(int r)
{
	static char junk[4096];
	int fl = fcntl(r, F_GETFL);
	fcntl(r, F_SETFL, fl | O_NONBLOCK);
	while (read(r, junk, sizeof(junk)) > 0)
		;
	fcntl(r, F_SETFL, fl);
}

static void client(void)
{
	count_sigpipes();
	int fd = client_conn();
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	int p[2];
	if (pipe(p) < 0)
		fatal("pipe");
	res("F_SETPIPE_SZ 4096", fcntl(p[1], F_SETPIPE_SZ, 4096));

	res("splice, the socket empty", splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	fill(p[1]);
	res("splice, the socket empty and the pipe full",
	    splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	drain(p[0]);
	tell();
	await_peer();
	wait_inq(fd, FIRST);

	/* the same pipe, many times: data and room */
	for (int i = 0; i < 3; i++) {
		ssize_t n = splice(fd, NULL, p[1], NULL, 500, SPLICE_F_NONBLOCK);
		say("splice 500 moved 1..500: %s; the socket holds the rest: %s",
		    yesno(n > 0 && n <= 500), yesno(readable_bytes(fd) == FIRST - (int)got - n));
		take(p[0], (size_t)(n > 0 ? n : 1));
	}
	fill(p[1]);
	int left = readable_bytes(fd);
	res("splice into the full pipe", splice(fd, NULL, p[1], NULL, 500, SPLICE_F_NONBLOCK));
	say("the socket holds as much: %s", yesno(readable_bytes(fd) == left));
	drain(p[0]);

	/* a pipe nobody reads, in the fd numbers of the first */
	res("close", close(p[0]));
	res("close", close(p[1]));
	int q[2];
	if (pipe(q) < 0)
		fatal("pipe");
	say("the new pipe has the old numbers: %s", yesno(q[0] == p[0] && q[1] == p[1]));
	res("close the reader", close(q[0]));
	res("splice into a pipe without readers, data in the socket",
	    splice(fd, NULL, q[1], NULL, 500, SPLICE_F_NONBLOCK));
	say("SIGPIPE count %d, the socket holds as much: %s", (int)sigpipes, yesno(readable_bytes(fd) == left));
	res("close", close(q[1]));

	/* the rest through a third pipe */
	if (pipe(p) < 0)
		fatal("pipe");
	while (got < FIRST) {
		ssize_t n = splice(fd, NULL, p[1], NULL, 65536, SPLICE_F_NONBLOCK);
		if (n <= 0)
			fatal("splice: %zd", n);
		take(p[0], (size_t)n);
	}
	say("all %d through the pipes, in order: %s", FIRST, yesno(ok));
	res("close", close(p[0]));
	res("splice into a pipe without readers, the socket empty",
	    splice(fd, NULL, p[1], NULL, 500, SPLICE_F_NONBLOCK));
	say("SIGPIPE count %d", (int)sigpipes);
	res("close", close(p[1]));

	/* the end of the stream */
	if (pipe(p) < 0)
		fatal("pipe");
	tell();
	await_peer();
	wait_inq(fd, 4);
	res("splice 4", splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	char buf[8];
	ssize_t n = read(p[0], buf, sizeof(buf));
	say("got \"%.*s\"", (int)(n > 0 ? n : 0), buf);
	wait_ev(fd, POLLRDHUP);
	fill(p[1]);
	res("splice at the end, the pipe full", splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	drain(p[0]);
	res("splice at the end", splice(fd, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
	say("SIGPIPE count %d", (int)sigpipes);
	tell();
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
