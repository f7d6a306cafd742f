/* SPDX-License-Identifier: MIT */
/* exec() of a program without the library, cut mid-stream with data in
 * flight both ways: the client has sent 70000 bytes the server has not read
 * and has read only 1234 of the server's 100000 when it exec()s python3
 * (LD_PRELOAD removed) with the same fd.  Python gets the rest of the
 * server's 100000 and 2000 more sent after the exec, exact and in order; the
 * server gets the client's 70000 then python's 500, exact and in order, then
 * EOF (design brief, layer 5: the connection switches back to TCP). */
// expect: switched 2
#include "common.h"

/* python: argv fd syncfd skip total coff n: tell the server it runs, read
 * the server's stream from offset skip to total (seed 16), send n bytes of
 * the client's stream from offset coff (seed 17), shut down, wait for EOF */
static const char py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"fd, sync, skip, total, coff, n = map(int, sys.argv[1:7])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(5)\n"
	"os.write(sync, b'x')\n"
	"want = pat(total - skip, 16, skip)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: recv error: %s' % type(e).__name__)\n"
	"print('client: python received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(n, 17, coff))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	send_pattern(fd, 100000, 16);
	say("sent 100000 before the exec");
	tell();
	await_peer();                           /* python runs */
	char buf[2000];
	pattern(buf, sizeof(buf), 100000, 16);
	res("send 2000 after the exec", send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 70501, &got);
	say("received %zu bytes up to EOF, exact: %s", got,
	    yesno(got == 70500 && h == pattern_ck(70500, 17)));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	send_pattern(fd, 70000, 17);
	say("sent 70000 before the exec");
	char part[1234], want[1234];
	pattern(want, sizeof(want), 0, 16);
	res("read part of the server's bytes", recv_all(fd, part, sizeof(part)));
	say("exact: %s", yesno(!memcmp(part, want, sizeof(want))));
	await_peer();                           /* the server sent 100000 */
	char a_fd[16], a_sync[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	say("exec python3 with the connected fd, without the library");
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	unsetenv("LD_PRELOAD");
	char *argv[] = { "python3", "-c", (char *)py, a_fd, a_sync, "1234", "102000", "70000", "500", NULL };
	execvp("python3", argv);
	fatal("exec python3");
}

int main(void)
{
	return run(server, client);
}
