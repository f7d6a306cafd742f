/* SPDX-License-Identifier: MIT */
/* The conversation shared by the spawn tests (sem_system, sem_system_lib,
 * sem_popen): the client spawns a helper that uses the connection between
 * two parts of its own use of it.  Before including, a test defines
 * SPAWN_CALL (the call's name in the transcript, "system()") and
 * SPAWN_HELPER (who speaks in between, "shell").
 *
 * client -> server, seed 17: 0..5000 (before), 5000..5700 (the helper),
 * 5700..6700 (after);
 * server -> client, seed 16: 0..3000 (before: 0..1000 for the helper, the
 * rest for the client), 3000..5000 (after the spawn returned).  The server
 * gets the client's 5000, the helper's 700 and the client's 1000, exact
 * and in order, then EOF. */
#include "common.c"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent 5000 */
	send_pattern(fd, 3000, 16);
	say("sent 3000 the client has not read");
	tell();
	await_peer();                           /* the spawn returned */
	char buf[2000];
	pattern(buf, sizeof(buf), 3000, 16);
	res("send 2000 after " SPAWN_CALL, send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 6701, &got);
	say("received %zu bytes up to EOF, exact (client's 5000, " SPAWN_HELPER "'s 700, client's 1000): %s",
	    got, yesno(got == 6700 && h == pattern_ck(6700, 17)));
	res("close", close(fd));
}

/* the client's part before the spawn: its fd */
static int client_before(void)
{
	int fd = client_conn();
	send_pattern(fd, 5000, 17);
	say("sent 5000 the server has not read");
	tell();
	await_peer();                           /* the server sent 3000 */
	return fd;
}

/* ... and after it */
static void client_after(int fd)
{
	char buf[4000], want[4000];
	tell();
	pattern(want, 4000, 1000, 16);
	ssize_t r = recv_all(fd, buf, 4000);
	say("client read %zd more (server's 1000..5000), exact: %s", r,
	    yesno(r == 4000 && !memcmp(buf, want, 4000)));
	pattern(buf, 1000, 5700, 17);
	res("send 1000 after " SPAWN_CALL, send_all(fd, buf, 1000));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

/* LD_PRELOAD out of the environment the helper inherits, and back */
static UNUSED char *preload_off(void)
{
	char *pre = getenv("LD_PRELOAD");
	pre = pre ? strdup(pre) : NULL;
	unsetenv("LD_PRELOAD");
	return pre;
}

static UNUSED void preload_on(char *pre)
{
	if (pre)
		setenv("LD_PRELOAD", pre, 1);
	free(pre);
}

/* python's part (SPAWN_PY_REPORT: how it reports what it read): read the
 * server's 0..1000 from the socket given by argv fd (SO_RCVTIMEO, not
 * settimeout(), which would leave the shared file nonblocking; cleared
 * after), send the client's 5000..5700 */
#ifdef SPAWN_PY_REPORT
#ifndef SPAWN_PY_SENT
#define SPAWN_PY_SENT ""
#endif
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
	SPAWN_PY_REPORT
	"s.sendall(pat(700, 17, 5000))\n"
	SPAWN_PY_SENT
	"s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack('ll', 0, 0))\n"
	"s.detach()\n";
#endif
