/* SPDX-License-Identifier: MIT */
/* system() with an accelerated connection that survives the exec (no
 * FD_CLOEXEC), the library kept in the environment: as sem_system, but the
 * shell (and the python3 it execs) load the library afresh and know nothing
 * of the connection, so they read and write the kernel socket all the same.
 * The client has sent 5000 bytes the server has not read and has read none
 * of the server's 3000 when it runs, through system(), python3 with the
 * fd: python reads the server's first 1000 bytes and sends the client's
 * next 700.  Afterwards the client goes on with the same fd: it reads the
 * server's remaining 2000 and 2000 more sent after system() returned, sends
 * 1000 more and shuts down writing.  The server gets the client's 5000,
 * python's 700 and the client's 1000, exact and in order, then EOF; two
 * halves switch back to TCP. */
// expect: switched 2
#include "common.c"

/* client -> server, seed 17: 0..5000 (before), 5000..5700 (python),
 * 5700..6700 (after);
 * server -> client, seed 16: 0..3000 (before: 0..1000 for python, the rest
 * for the client), 3000..5000 (after system() returned) */

/* python: argv fd: read the server's stream 0..1000 (SO_RCVTIMEO, not
 * settimeout(), which would leave the shared file nonblocking; cleared
 * after), send the client's stream 5000..5700 */
static const char py[] =
	"import socket, struct, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"s = socket.socket(fileno=int(sys.argv[1]))\n"
	"s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack('ll', 3, 0))\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < 1000:\n"
	"        b = s.recv(1000 - len(got))\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"print('client: python: received %d bytes, exact: %s' % (len(got), 'yes' if got == pat(1000, 16) else 'no'))\n"
	"s.sendall(pat(700, 17, 5000))\n"
	"print('client: python: sent 700')\n"
	"s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack('ll', 0, 0))\n"
	"s.detach()\n";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent 5000 */
	send_pattern(fd, 3000, 16);
	say("sent 3000 the client has not read");
	tell();
	await_peer();                           /* system() returned */
	char buf[2000];
	pattern(buf, sizeof(buf), 3000, 16);
	res("send 2000 after system()", send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 6701, &got);
	say("received %zu bytes up to EOF, exact (client's 5000, python's 700, client's 1000): %s",
	    got, yesno(got == 6700 && h == pattern_ck(6700, 17)));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	send_pattern(fd, 5000, 17);
	say("sent 5000 the server has not read");
	tell();
	await_peer();                           /* the server sent 3000 */

	char cmd[256], buf[4000], want[4000];
	snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 -c \"$SEM_PY\" %d", fd);
	setenv("SEM_PY", py, 1);
	say("system(): python3 reads 1000, sends 700, LD_PRELOAD kept");
	fflush(t_out);
	int saved = dup(1);                     /* python prints into the transcript */
	if (saved < 0 || dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	int st = system(cmd);
	if (dup2(saved, 1) < 0)
		fatal("dup2");
	close(saved);
	say("system() exit status 0: %s", yesno(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0));

	tell();
	pattern(want, 4000, 1000, 16);
	ssize_t r = recv_all(fd, buf, 4000);
	say("client read %zd more (server's 1000..5000), exact: %s", r,
	    yesno(r == 4000 && !memcmp(buf, want, 4000)));
	pattern(buf, 1000, 5700, 17);
	res("send 1000 after system()", send_all(fd, buf, 1000));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
