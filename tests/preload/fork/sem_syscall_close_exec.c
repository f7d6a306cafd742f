/* SPDX-License-Identifier: MIT */
/* close() and execve() made through syscall(2): the peer sees the close
 * (EOF after the bytes), and an exec'd program without the library reads
 * the connection's bytes. */
// expect: switched 2
#include <sys/syscall.h>

#include "common.h"

static void server(int lfd)
{
	int a = server_conn(lfd), b = server_conn(lfd);
	size_t got;
	uint64_t h = recv_count(a, 1u << 20, &got);
	say("a: %zu bytes then EOF, exact: %s", got, yesno(got == 3000 && h == pattern_ck(3000, 71)));
	send_pattern(b, 500, 72);
	h = recv_count(b, 1u << 20, &got);
	say("b: the exec'd program echoed %zu bytes, exact: %s", got,
	    yesno(got == 500 && h == pattern_ck(500, 72)));
	close(a);
	close(b);
}

static void client(void)
{
	int a = client_conn(), b = client_conn();
	send_pattern(a, 3000, 71);
	res("syscall(SYS_close, a)", syscall(SYS_close, a));
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", b);
	char *argv[] = { "python3", "-c",
		"import socket,sys\n"
		"s=socket.socket(fileno=int(sys.argv[1]))\n"
		"got=b''\n"
		"while len(got)<500:\n"
		"    d=s.recv(500-len(got))\n"
		"    if not d: break\n"
		"    got+=d\n"
		"s.sendall(got)\n"
		"s.close()\n", fdarg, NULL };
	extern char **environ;
	static char *env[256];
	int n = 0;
	for (char **e = environ; *e && n < 254; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11))
			env[n++] = *e;
	env[n] = NULL;
	fflush(t_out);
	syscall(SYS_execve, "/usr/bin/python3", argv, env);
	say("execve failed: %s", ename(errno));
}

int main(void)
{
	return run(server, client);
}
