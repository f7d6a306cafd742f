/* SPDX-License-Identifier: MIT */
// expect: tcp
/* The server runs under the interposer, the client is a plain program
 * (python3, LD_PRELOAD removed from its environment): the client must see
 * exactly the bytes the server wrote, and the server exactly the client's. */
#include "common.h"

#define DOWN 70000      /* server -> client */
#define UP 90000        /* client -> server */

static void server(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	res("send banner", send(fd, "220 hello\r\n", 11, 0));
	send_pattern(fd, DOWN, 14);
	say("sent %d pattern bytes", DOWN);
	size_t got;
	uint64_t h = recv_count(fd, UP + 1, &got);
	say("received %zu bytes up to EOF, exact: %s", got, yesno(got == UP && h == pattern_ck(UP, 15)));
	res("close", close(fd));
}

/* the pattern of common.c, in Python */
static const char py[] =
	"import socket, sys\n"
	"def pat(n, seed):\n"
	"    return bytes(((x * 131 + seed + (x >> 9) + (x >> 17)) & 255) for x in range(n))\n"
	"s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
	"want = b'220 hello\\r\\n' + pat(70000, 14)\n"
	"got = b''\n"
	"while len(got) < len(want):\n"
	"    b = s.recv(65536)\n"
	"    if not b: break\n"
	"    got += b\n"
	"print('client: received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(90000, 15))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"print('client: recv at EOF = %d' % len(s.recv(100)))\n"
	"s.close()\n";

static void client(void)
{
	char port[16];
	snprintf(port, sizeof(port), "%u", (unsigned)t_port);
	char *argv[] = { "python3", "-c", (char *)py, port, NULL };
	exec_python(argv, false);
}

int main(void)
{
	return run(server, client);
}
