/* SPDX-License-Identifier: MIT */
/* The reader switches back to TCP while the peer, which has shut down
 * writing, still has bytes unread in shared memory: the server sends 300000
 * bytes and shuts down writing (its FIN goes out); the client reads only
 * the first 100000, sends 1000 the server does not read yet, and exec()s
 * python3 (LD_PRELOAD removed) with the fd.  Python must get the server's
 * other 200000, exact and in order, then EOF; it sends 500 and shuts down
 * writing; the server gets the client's 1000 then python's 500, exact and
 * in order, then EOF.  The exec switches the connection: two halves. */
// expect: switched 2
#include "common.h"

/* server -> client, seed 16: 0..300000 then FIN (0..100000 read before the
 * exec); client -> server, seed 17: 0..1000 (before), 1000..1500 (python),
 * then FIN */
#define NS 300000
#define NREAD 100000

/* python: argv fd sync skip total: tell the server it runs, read the
 * server's stream skip..total and its EOF, send the client's 1000..1500,
 * shut down writing */
static const char py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"fd, sync, skip, total = map(int, sys.argv[1:5])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(5)\n"
	"os.write(sync, b'x')\n"
	"want = pat(total - skip, 16, skip)\n"
	"got = bytearray()\n"
	"try:\n"
	"    while True:\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"print('client: python: received %d bytes up to EOF (want %d), exact: %s' %\n"
	"      (len(got), len(want), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(500, 17, 1000))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"print('client: python: sent 500, shut down writing')\n"
	"s.close()\n";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	int v = 1 << 20;                        /* all 300000 fit unread on kernel TCP too */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
		fatal("SO_SNDBUF");
	send_pattern(fd, NS, 16);
	say("sent %d", NS);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	tell();
	await_peer();                           /* python runs */
	size_t got;
	uint64_t h = recv_count(fd, 1501, &got);
	say("received %zu bytes up to EOF, exact (client's 1000, python's 500): %s", got,
	    yesno(got == 1500 && h == pattern_ck(1500, 17)));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	await_peer();                           /* the server sent 300000, shut down */
	static char buf[NREAD], want[NREAD];
	pattern(want, NREAD, 0, 16);
	ssize_t r = recv_all(fd, buf, NREAD);
	say("read the first %zd, exact: %s", r, yesno(r == NREAD && !memcmp(buf, want, NREAD)));
	pattern(buf, 1000, 0, 17);
	res("send 1000 the server does not read yet", send_all(fd, buf, 1000));
	char a_fd[16], a_sync[16], a_skip[16], a_total[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	snprintf(a_skip, sizeof(a_skip), "%d", NREAD);
	snprintf(a_total, sizeof(a_total), "%d", NS);
	say("exec python3 with the connected fd, without the library");
	char *argv[] = { "python3", "-c", (char *)py, a_fd, a_sync, a_skip, a_total, NULL };
	exec_python(argv, false);
}

int main(void)
{
	return run(server, client);
}
