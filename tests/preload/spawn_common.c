/* SPDX-License-Identifier: MIT */
/* The spawn programs' conversation (spawn_common.h). */
#include "spawn_common.h"

static const char *spawn_call = "the spawn", *spawn_helper = "the helper";

static void spawn_server(int lfd)
{
	char label[128];
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent 5000 */
	send_pattern(fd, 3000, 16);
	say("sent 3000 the client has not read");
	tell();
	await_peer();                           /* the spawn returned */
	char buf[2000];
	pattern(buf, sizeof(buf), 3000, 16);
	snprintf(label, sizeof(label), "send 2000 after %s", spawn_call);
	res(label, send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 6701, &got);
	say("received %zu bytes up to EOF, exact (client's 5000, %s's 700, client's 1000): %s",
	    got, spawn_helper, yesno(got == 6700 && h == pattern_ck(6700, 17)));
	res("close", close(fd));
}

int spawn_run(const char *call, const char *helper, void (*client)(void))
{
	spawn_call = call;
	spawn_helper = helper;
	return run(spawn_server, client);
}

int client_before(void)
{
	int fd = client_conn();
	send_pattern(fd, 5000, 17);
	say("sent 5000 the server has not read");
	tell();
	await_peer();                           /* the server sent 3000 */
	return fd;
}

void client_after(int fd)
{
	char buf[4000], want[4000], label[128];
	tell();
	pattern(want, 4000, 1000, 16);
	ssize_t r = recv_all(fd, buf, 4000);
	say("client read %zd more (server's 1000..5000), exact: %s", r,
	    yesno(r == 4000 && !memcmp(buf, want, 4000)));
	pattern(buf, 1000, 5700, 17);
	snprintf(label, sizeof(label), "send 1000 after %s", spawn_call);
	res(label, send_all(fd, buf, 1000));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

char *preload_off(void)
{
	char *pre = getenv("LD_PRELOAD");
	pre = pre ? strdup(pre) : NULL;
	unsetenv("LD_PRELOAD");
	return pre;
}

void preload_on(char *pre)
{
	if (pre)
		setenv("LD_PRELOAD", pre, 1);
	free(pre);
}

char *spawn_py(const char *report, const char *sent)
{
	static const char head[] =
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
		"except OSError as e:\n";
	static const char mid[] = "s.sendall(pat(700, 17, 5000))\n";
	static const char tail[] =
		"s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack('ll', 0, 0))\n"
		"s.detach()\n";
	char *py;
	if (asprintf(&py, "%s%s%s%s%s", head, report, mid, sent, tail) < 0)
		fatal("asprintf");
	return py;
}
