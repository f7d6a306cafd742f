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
#define SPAWN_CALL "system()"
#define SPAWN_HELPER "python"
#define SPAWN_PY_REPORT \
	"    print('client: python: recv error: %s' % type(e).__name__)\n" \
	"print('client: python: received %d bytes, exact: %s' % (len(got), 'yes' if got == pat(1000, 16) else 'no'))\n"
#define SPAWN_PY_SENT "print('client: python: sent 700')\n"
#include "spawn_common.h"

static void client(void)
{
	int fd = client_before();
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 -c \"$SEM_PY\" %d", fd);
	char *py = spawn_py(SPAWN_PY_REPORT, SPAWN_PY_SENT);
	setenv("SEM_PY", py, 1);
	free(py);
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
	client_after(fd);
}

int main(void)
{
	return spawn_run(SPAWN_CALL, SPAWN_HELPER, client);
}
