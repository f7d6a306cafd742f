/* SPDX-License-Identifier: MIT */
/* posix_spawn of a program without the library (glibc execs inside it without
 * calling execve through the PLT), the parent keeping its copy; otherwise as
 * sem_fork_exec_child: the client exchanges a message, sends 10000 bytes the server has not
 * read, leaves the server's 40000 unread, and forks a child that exec()s
 * python3 with LD_PRELOAD removed and the fd number on its command line.
 * The parent keeps the fd open without touching it until the child exits,
 * then closes it.  Python reads the 40000 and the 3000 the server sends
 * after it started, exact and in order, sends 2000 and shuts down writing
 * (a FIN, although the parent still holds the socket); the server gets the
 * client's 10000 then python's 2000, exact and in order, then EOF.  The
 * exec by a process that inherited the connection switches it back to TCP,
 * so two halves switch. */
// expect: switched 2
#include "common.h"
#include <spawn.h>

/* client -> server, seed 71: 0..500 (message), 500..10500 (unread at the
 * fork), 10500..12500 (python);
 * server -> client, seed 72: 0..800 (answer), 800..40800 (unread at the
 * fork), 40800..43800 (after python started) */

/* python: argv fd sync: tell the server it runs, read the server's stream
 * from 800 to 43800, send the client's stream from 10500 to 12500, shut
 * down writing, wait for EOF */
static const char py[] =
	"import os, socket, sys\n"
	"def pat(n, seed, off=0):\n"
	"    return bytes((((x + off) * 131 + seed + ((x + off) >> 9) + ((x + off) >> 17)) & 255) for x in range(n))\n"
	"fd, sync = int(sys.argv[1]), int(sys.argv[2])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(10)\n"
	"os.write(sync, b'x')\n"
	"want = pat(43000, 72, 800)\n"
	"got = b''\n"
	"try:\n"
	"    while len(got) < len(want):\n"
	"        b = s.recv(65536)\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"print('client: python: received %d bytes, exact: %s' % (len(got), 'yes' if got == want else 'no'))\n"
	"s.sendall(pat(2000, 71, 10500))\n"
	"print('client: python: sent 2000')\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: python: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: python: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	say("message (500), exact: %s", yesno(recv_exact_at(fd, 0, 500, 71)));
	send_at(fd, 0, 800, 72);
	await_peer();                           /* the client sent 10000 more */
	send_at(fd, 800, 40000, 72);
	say("sent 40000 the client has not read");
	tell();
	await_peer();                           /* python runs */
	send_at(fd, 40800, 3000, 72);
	say("sent 3000 after python started");
	static char buf[12001], want[12000];
	pattern(want, sizeof(want), 500, 71);
	ssize_t n = recv_all(fd, buf, sizeof(buf));
	say("received %zd bytes up to EOF, exact (client's 10000, python's 2000): %s", n,
	    yesno(n == 12000 && !memcmp(buf, want, sizeof(want))));
	res("close", close(fd));
}

static void client(void)
{
	int fd = client_conn();
	send_at(fd, 0, 500, 71);
	say("answer (800), exact: %s", yesno(recv_exact_at(fd, 0, 800, 72)));
	send_at(fd, 500, 10000, 71);
	say("sent 10000 the server has not read");
	tell();
	await_peer();                           /* the server sent 40000 */
	char a_fd[16], a_sync[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_sync, sizeof(a_sync), "%d", t_c2p[1]);
	say("posix_spawn python3 without the library");
	fflush(t_out);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fileno(t_out), 1);
	extern char **environ;
	int ne = 0;
	while (environ[ne])
		ne++;
	char **env = calloc((size_t)ne + 1, sizeof(char *));
	int k = 0;
	for (int i = 0; i < ne; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	char *argv[] = { "python3", "-c", (char *)py, a_fd, a_sync, NULL };
	pid_t pid;
	if (posix_spawn(&pid, "/usr/bin/python3", &fa, NULL, argv, env) != 0)
		fatal("posix_spawn");
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("python exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	res("close the copy it kept (never touched)", close(fd));
}

int main(void)
{
	return run(server, client);
}
