/* SPDX-License-Identifier: MIT */
/* splice() and sendfile() into a socket that cannot take the bytes: the
 * kernel moves only what the socket accepted, the rest stays in the pipe
 * (or the file: its offset, or its position, moves by what was sent).
 *
 * The client's stream is one pattern throughout: send, splice from a pipe
 * holding the stream's next bytes, sendfile from a file that is the
 * stream.  A nonblocking socket filled to EAGAIN: splice of 1000 bytes
 * (plain, SPLICE_F_NONBLOCK, SPLICE_F_MORE) is EAGAIN and the pipe still
 * holds them; sendfile and sendfile64 are EAGAIN, offset and position
 * unmoved.  Blocking with SO_SNDTIMEO: the same after the timeout.  Room
 * for part: the server reads 20000 bytes, a splice of 64 KiB moves some
 * (how much is the transport's), and the pipe holds exactly the rest.  A
 * peer that closed: the first splice goes (the peer answers RST), then
 * ECONNRESET, then EPIPE with SIGPIPE, the pipe keeping its bytes.  The
 * server checks every byte.  The filled connection has fixed buffers
 * (SO_SNDBUF on the client's socket, SO_RCVBUF on the listener), as in
 * sem_nonblock: the kernel's autotuning cannot open room meanwhile. */
#include "common.h"
#include <sys/sendfile.h>

#define BUFSZ 65536
#define SEED 9
#define FSIZE (8u << 20)

static void server(int lfd)
{
	set_rcvbuf(lfd, BUFSZ);
	tell();                                 /* client: connect now */
	int fd = server_conn(lfd);
	static char buf[65536], want[65536];
	uint64_t got = 0;
	bool ok = true;
	/* the client names how far to read, and hears when that is done */
	for (uint64_t target; (target = await_u64()) != UINT64_MAX; tell()) {
		while (got < target) {
			size_t k = target - got < sizeof(buf) ? (size_t)(target - got) : sizeof(buf);
			ssize_t n = recv(fd, buf, k, 0);
			if (n <= 0)
				fatal("server recv: %zd", n);
			pattern(want, (size_t)n, got, SEED);
			ok = ok && !memcmp(buf, want, (size_t)n);
			got += (uint64_t)n;
		}
	}
	say("every byte in order: %s", yesno(ok));
	res("close", close(fd));
	tell();
}

static uint64_t sent;                   /* the stream's next byte */

static void fill(int fd)
{
	static char buf[65536];
	for (;;) {
		pattern(buf, sizeof(buf), sent, SEED);
		ssize_t n = send(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			break;
		sent += (uint64_t)n;
		if (sent > (1u << 30))
			fatal("never full");
	}
	if (errno != EAGAIN)
		fatal("fill: %s", ename(errno));
}

/* the pipe holds the stream's next bytes (those from sent): n more */
static void load(int p0, int p1, size_t n)
{
	static char buf[65536];
	pattern(buf, n, sent + (uint64_t)readable_bytes(p0), SEED);
	if (write(p1, buf, n) != (ssize_t)n)
		fatal("pipe write");
}

/* the pipe emptied (what it holds is the stream's only while nothing
 * else was sent) */
static void empty(int p0)
{
	static char buf[65536];
	ssize_t n = readable_bytes(p0);
	if (n > 0 && read(p0, buf, (size_t)n) != n)
		fatal("pipe read");
}

/*
 * Moving 1000 bytes into the socket just filled: a nonblocking attempt is
 * EAGAIN (exact: printed); one that waits (SO_SNDTIMEO) may find room the
 * kernel's TCP opened meanwhile (it may prune its receive queue), so only
 * what must hold is printed: EAGAIN or some moved, and the pipe, the
 * offset, the position moved by exactly that.
 */
static void attempts(const char *how, int fd, int p0, int p1, int f, bool exact)
{
	say("-- %s", how);
	static const struct { const char *what; unsigned flags; } sp[] = {
		{ "splice 1000", 0 },
		{ "splice 1000 SPLICE_F_NONBLOCK", SPLICE_F_NONBLOCK },
		{ "splice 1000 SPLICE_F_MORE", SPLICE_F_MORE },
	};
	for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
		empty(p0);
		fill(fd);
		load(p0, p1, 1000);
		ssize_t n = splice(p0, NULL, fd, NULL, 1000, sp[i].flags);
		if (exact)
			res(sp[i].what, n);
		else
			say("%s: EAGAIN or moved some: %s", sp[i].what,
			    yesno(n > 0 || (n < 0 && errno == EAGAIN)));
		say("pipe lost nothing: %s", yesno(readable_bytes(p0) == 1000 - (n > 0 ? n : 0)));
		sent += n > 0 ? (uint64_t)n : 0;
	}
	for (int pos = 0; pos < 2; pos++) {
		empty(p0);
		fill(fd);
		off_t off = (off_t)sent;
		lseek(f, (off_t)sent, SEEK_SET);
		ssize_t n = pos ? sendfile64(fd, f, NULL, 1000) : sendfile(fd, f, &off, 1000);
		const char *what = pos ? "sendfile64 1000 from the position" :
				   "sendfile 1000 at an offset";
		if (exact)
			res(what, n);
		else
			say("%s: EAGAIN or moved some: %s", what,
			    yesno(n > 0 || (n < 0 && errno == EAGAIN)));
		off_t now = pos ? lseek(f, 0, SEEK_CUR) : off;
		say("%s moved by what was sent: %s", pos ? "position" : "offset",
		    yesno(now - (off_t)sent == (n > 0 ? n : 0)));
		sent += n > 0 ? (uint64_t)n : 0;
	}
}

static void client(void)
{
	count_sigpipes();
	int fd = sndbuf_socket(BUFSZ);
	await_peer();                           /* the listener's SO_RCVBUF is set */
	connect_hs(fd);
	int p[2];
	if (pipe(p) < 0)
		fatal("pipe");
	/* the file is the stream */
	int f = pattern_file("sem_splice_full", FSIZE, SEED);
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	attempts("nonblocking, full", fd, p[0], p[1], f, true);
	fcntl(fd, F_SETFL, fl);
	struct timeval tv = { 0, 100000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	attempts("blocking with SO_SNDTIMEO, full", fd, p[0], p[1], f, false);
	tv.tv_usec = 0;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

	/* the server reads everything: the 1000 go */
	uint64_t srv = sent;                    /* how far the server has read */
	tell_u64(srv);
	await_peer();
	empty(p[0]);
	load(p[0], p[1], 1000);
	wait_ev(fd, POLLOUT);
	res("-- drained; splice 1000", splice(p[0], NULL, fd, NULL, 1000, 0));
	say("pipe holds %d", readable_bytes(p[0]));
	sent += 1000;

	/* room for part of 64 KiB: the server reads 20000 */
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	fill(fd);
	empty(p[0]);
	load(p[0], p[1], 65536);
	srv += 20000;
	tell_u64(srv);
	await_peer();
	ssize_t n = splice(p[0], NULL, fd, NULL, 65536, 0);
	say("-- room for part; splice 64 KiB: EAGAIN or moved some: %s",
	    yesno(n > 0 || (n < 0 && errno == EAGAIN)));
	say("pipe lost nothing: %s", yesno(readable_bytes(p[0]) == 65536 - (n > 0 ? n : 0)));
	sent += n > 0 ? (uint64_t)n : 0;
	/* the server reads everything: the rest goes */
	srv = sent;
	tell_u64(srv);
	await_peer();
	while (readable_bytes(p[0]) > 0) {
		wait_ev(fd, POLLOUT);
		int before = readable_bytes(p[0]);
		n = splice(p[0], NULL, fd, NULL, 65536, 0);
		if (n <= 0 || readable_bytes(p[0]) != before - n)
			fatal("splice of the rest: %zd (pipe %d -> %d)", n, before, readable_bytes(p[0]));
		sent += (uint64_t)n;
	}
	say("the rest moved");
	srv = sent;
	tell_u64(srv);
	await_peer();

	/* the peer closes */
	tell_u64(UINT64_MAX);
	await_peer();
	fcntl(fd, F_SETFL, fl);
	load(p[0], p[1], 1000);
	res("-- peer closed; splice 1000", splice(p[0], NULL, fd, NULL, 1000, 0));
	say("pipe holds %d", readable_bytes(p[0]));
	wait_ev(fd, POLLERR);                   /* the peer's RST */
	load(p[0], p[1], 1000);
	res("splice 1000", splice(p[0], NULL, fd, NULL, 1000, 0));
	say("pipe holds %d, SIGPIPE count %d", readable_bytes(p[0]), (int)sigpipes);
	res("splice 1000", splice(p[0], NULL, fd, NULL, 1000, 0));
	say("pipe holds %d, SIGPIPE count %d", readable_bytes(p[0]), (int)sigpipes);
	off_t off = 0;
	res("sendfile 1000 at an offset", sendfile(fd, f, &off, 1000));
	say("offset moved by %lld, SIGPIPE count %d", (long long)off, (int)sigpipes);
	close(f);
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
