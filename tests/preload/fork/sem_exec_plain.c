/* SPDX-License-Identifier: MIT */
/* An accelerated connection handed to a program without the library: the
 * client exec()s python3 (LD_PRELOAD removed) which goes on with the same
 * fd.  Bytes the server sent before the exec (not yet read) and after it
 * must all reach python, and python's bytes the server (design brief,
 * layer 5: the connection switches back to TCP).  "After the exec" is
 * after it (the client's process name changed), not after a fixed time. */
// expect: switched 2
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	send_pattern(fd, 1000, 16);
	say("sent 1000 before the exec");
	tell();
	await_peer();                           /* the client is about to exec */
	await_peer_exec();
	char buf[2000];
	pattern(buf, 2000, 1000, 16);
	res("send 2000 after the exec", send_all(fd, buf, 2000));
	size_t got;
	uint64_t h = recv_count(fd, 501, &got);
	say("received %zu bytes up to EOF, exact: %s", got, yesno(got == 500 && h == pattern_ck(500, 17)));
	res("close", close(fd));
}

static const char py[] =
	"import socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"s = socket.socket(fileno=int(sys.argv[1]))\n"
	"s.settimeout(5)\n"
	"want = pat(3000, 16)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: recv error: %s' % type(e).__name__)\n"
	"print('client: python received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(500, 17))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static void client(void)
{
	int fd = client_conn();
	char num[16];
	await_peer();                           /* the server sent 1000 */
	snprintf(num, sizeof(num), "%d", fd);
	say("exec python3 with the connected fd");
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	unsetenv("LD_PRELOAD");
	tell();
	char *argv[] = { "python3", "-c", (char *)py, num, NULL };
	execvp("python3", argv);
	fatal("exec python3");
}

int main(void)
{
	return run(server, client);
}
