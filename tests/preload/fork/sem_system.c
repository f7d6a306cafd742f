/* SPDX-License-Identifier: MIT */
/* system() with an accelerated connection that survives the exec (no
 * FD_CLOEXEC), LD_PRELOAD removed: glibc's system() spawns /bin/sh through
 * its internal posix_spawn (clone(CLONE_VM|CLONE_VFORK) + the execve system
 * call), never through an interposable exec symbol.  The client has sent
 * 5000 bytes the server has not read and has read none of the server's
 * 3000 when it runs, through system(),
 *     timeout 3 head -c 1000 <&FD >OUT; cat IN >&FD
 * (head takes the server's first 1000 bytes, cat sends the client's next
 * 700).  Afterwards the client goes on with the same fd: it reads the
 * server's remaining 2000 and 2000 more sent after system() returned, sends
 * 1000 more and shuts down writing.  The server gets the client's 5000,
 * the shell's 700 and the client's 1000, exact and in order, then EOF.  The
 * shell's commands read the kernel socket, so the connection switches back
 * to TCP before the spawn: two halves switch. */
// expect: switched 2
#define SPAWN_CALL "system()"
#define SPAWN_HELPER "shell"
#include "spawn_common.h"

static char dir[] = "/tmp/sem_system.XXXXXX";

/* a single-digit fd for the shell's redirections (dash takes no more) */
static int small_fd(int fd)
{
	if (fd <= 9)
		return fd;
	for (int d = 9; d >= 3; d--)
		if (fcntl(d, F_GETFD) < 0 && errno == EBADF) {
			if (dup2(fd, d) != d)
				fatal("dup2");
			close(fd);
			return d;
		}
	fatal("no free fd below 10");
}

static void client(void)
{
	int fd = small_fd(client_before());

	if (!mkdtemp(dir))
		fatal("mkdtemp");
	char in[64], out[64], buf[4000], want[1000];
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	FILE *f = fopen(in, "w");
	pattern(buf, 700, 5000, 17);
	if (!f || fwrite(buf, 1, 700, f) != 700 || fclose(f))
		fatal("write %s", in);

	char cmd[256];
	snprintf(cmd, sizeof(cmd), "timeout 3 head -c 1000 <&%d >%s; cat %s >&%d", fd, out, in, fd);
	char *pre = preload_off();
	say("system(): head reads 1000, cat sends 700, without the library");
	int st = system(cmd);
	preload_on(pre);
	say("system() exit status 0: %s", yesno(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0));

	f = fopen(out, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	pattern(want, 1000, 0, 16);
	say("head got %zu bytes, exact: %s", n, yesno(n == 1000 && !memcmp(buf, want, 1000)));
	unlink(in);
	unlink(out);
	rmdir(dir);
	client_after(fd);
}

int main(void)
{
	return spawn_run(SPAWN_CALL, SPAWN_HELPER, client);
}
