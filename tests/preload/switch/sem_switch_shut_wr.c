/* SPDX-License-Identifier: MIT */
/* The side that has shut down writing switches back to TCP with its bytes
 * still unread in shared memory: the client sends 300000 bytes and
 * shuts down writing (its FIN goes out), the server reads only the first
 * 100000 and sends 1000 the client does not read, then the client exec()s
 * python3 (LD_PRELOAD removed) with the fd.  The server must still get the
 * client's other 200000, exact and in order, then EOF; python gets the
 * server's 1000 and 2000 more sent after it started, exact and in order,
 * then EOF.  The exec switches the connection: two halves. */
// expect: switched 2
#include "common.h"

/* client -> server, seed 17: 0..300000 then FIN (0..100000 read before the
 * exec); server -> client, seed 16: 0..1000 (before), 1000..3000 (after
 * python started), then FIN */
#define NC 300000
#define NREAD 100000

/* python: argv fd sync: tell the server it runs, read the server's stream
 * 0..3000 and its EOF */
static const char py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"s = socket.socket(fileno=int(sys.argv[1]))\n"
	"s.settimeout(5)\n"
	"os.write(int(sys.argv[2]), b'x')\n"
	"want = pat(3000, 16)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"    print('client: python: received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"    print('client: python: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"s.close()\n";

/* receive up to n bytes (fewer at EOF), *got of them; true if they are the
 * stream's bytes from off on */
static bool recv_range(int fd, size_t off, size_t n, unsigned seed, size_t *got)
{
	static char buf[65536], want[65536];
	bool same = true;
	*got = 0;
	while (*got < n) {
		size_t k = n - *got < sizeof(buf) ? n - *got : sizeof(buf);
		ssize_t r = recv_all(fd, buf, k);
		if (r < 0)
			fatal("recv");
		pattern(want, (size_t)r, off + *got, seed);
		same = same && !memcmp(buf, want, (size_t)r);
		*got += (size_t)r;
		if ((size_t)r < k)
			break;
	}
	return same;
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent 300000, shut down */
	size_t got;
	bool same = recv_range(fd, 0, NREAD, 17, &got);
	say("read the first %d, exact: %s", NREAD, yesno(same && got == NREAD));
	send_pattern(fd, 1000, 16);
	say("sent 1000 the client does not read");
	tell();
	await_peer();                           /* python runs */
	char buf[2000];
	pattern(buf, sizeof(buf), 1000, 16);
	res("send 2000 after python started", send_all(fd, buf, sizeof(buf)));
	/* one byte more than is left: the client's 100000..300000, then EOF */
	same = recv_range(fd, NREAD, NC - NREAD + 1, 17, &got);
	say("received %zu more bytes up to EOF (want %d), exact: %s", got, NC - NREAD,
	    yesno(same && got == NC - NREAD));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	int v = 1 << 20;                        /* all 300000 fit unread on kernel TCP too */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
		fatal("SO_SNDBUF");
	send_pattern(fd, NC, 17);
	say("sent %d", NC);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	tell();
	await_peer();                           /* the server read 100000, sent 1000 */
	char a_fd[16], a_sync[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	say("exec python3 with the connected fd, without the library");
	char *argv[] = { "python3", "-c", (char *)py, a_fd, a_sync, NULL };
	exec_python(argv, false);
}

int main(void)
{
	return run(server, client);
}
