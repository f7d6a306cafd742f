/* SPDX-License-Identifier: MIT */
/* A connection switched back to TCP after its peer closed: the client
 * sends "hello" and closes at once (its close on shared memory waits for
 * the server's FIN: linger.c), then stays alive, idle.  The server has not
 * read anything; it forks a child that exec()s python3 without the library
 * with the fd, and keeps its copy until the child exits.  Python must read
 * "hello" and then EOF (the client's FIN, which over kernel TCP was sent
 * at its close) — not wait for the client to exit, or for its close to
 * give up waiting. */
// expect: switched 1
#include "common.h"

static const char py[] =
	"import socket, sys\n"
	"s = socket.socket(fileno=int(sys.argv[1]))\n"
	"s.settimeout(30)\n"
	"got = b''\n"
	"try:\n"
	"    while True:\n"
	"        b = s.recv(100)\n"
	"        if not b: break\n"
	"        got += b\n"
	"    print('server: python: received %r, then EOF' % got)\n"
	"except OSError as e:\n"
	"    print('server: python: %r, then %s' % (got, type(e).__name__))\n"
	"s.close()\n";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent and closed */
	say("fork a child that execs python3 with the connection");
	fflush(t_out);
	char num[16];
	snprintf(num, sizeof(num), "%d", fd);
	pid_t pid = fork();
	if (pid < 0)
		fatal("fork");
	if (pid == 0) {
		if (dup2(fileno(t_out), 1) < 0)
			fatal("dup2");
		unsetenv("LD_PRELOAD");
		char *argv[] = { "python3", "-c", (char *)py, num, NULL };
		execvp("python3", argv);
		fatal("exec python3");
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		fatal("python3");
	res("close", close(fd));
	tell();                                 /* the client may go */
}

static void client(void)
{
	int fd = client_conn();
	res("send hello", send_all(fd, "hello", 5));
	res("close", close(fd));
	tell();
	await_peer();                           /* idle until the server is done */
}

int main(void)
{
	return run(server, client);
}
