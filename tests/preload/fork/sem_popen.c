/* SPDX-License-Identifier: MIT */
/* popen(..., "r") with an accelerated connection that survives the exec (no
 * FD_CLOEXEC), LD_PRELOAD removed: glibc's popen() spawns /bin/sh through
 * its internal posix_spawn, never through an interposable exec symbol.  The
 * client has sent 5000 bytes the server has not read and has read none of
 * the server's 3000 when it popen()s python3 with the fd number: python
 * reads the server's first 1000 bytes from the socket and copies them to
 * its stdout (the popen pipe, which the client reads and checks), then
 * sends the client's next 700.  After pclose() the client goes on with the
 * same fd: it reads the server's remaining 2000 and 2000 more sent after
 * pclose(), sends 1000 more and shuts down writing.  The server gets the
 * client's 5000, python's 700 and the client's 1000, exact and in order,
 * then EOF; two halves switch back to TCP. */
// expect: switched 2
#define SPAWN_CALL "pclose()"
#define SPAWN_HELPER "python"
#define SPAWN_PY_REPORT \
	"    sys.stderr.write('python: recv error: %s\\n' % type(e).__name__)\n" \
	"sys.stdout.buffer.write(got)\n" \
	"sys.stdout.flush()\n"
#include "spawn_common.h"

static void client(void)
{
	int fd = client_before();
	char cmd[256], buf[4000], want[1000];
	snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 -c \"$SEM_PY\" %d", fd);
	char *py = spawn_py(SPAWN_PY_REPORT, "");
	setenv("SEM_PY", py, 1);
	free(py);
	char *pre = preload_off();
	say("popen(\"r\"): python3 copies 1000 from the socket to the pipe, sends 700, without the library");
	FILE *p = popen(cmd, "r");
	preload_on(pre);
	if (!p)
		fatal("popen");
	size_t n = fread(buf, 1, sizeof(buf), p);
	pattern(want, 1000, 0, 16);
	say("read %zu bytes from the pipe, exact: %s", n, yesno(n == 1000 && !memcmp(buf, want, 1000)));
	int st = pclose(p);
	say("pclose() exit status 0: %s", yesno(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0));
	client_after(fd);
}

int main(void)
{
	return spawn_run(SPAWN_CALL, SPAWN_HELPER, client);
}
