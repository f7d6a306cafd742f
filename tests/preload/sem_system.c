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
#include "common.c"

/* client -> server, seed 17: 0..5000 (before), 5000..5700 (the shell's
 * cat), 5700..6700 (after);
 * server -> client, seed 16: 0..3000 (before: 0..1000 for head, the rest
 * for the client), 3000..5000 (after system() returned) */

static char dir[] = "/tmp/sem_system.XXXXXX";

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                           /* the client sent 5000 */
	send_pattern(fd, 3000, 16);
	say("sent 3000 the client has not read");
	tell();
	await_peer();                           /* system() returned */
	char buf[2000];
	pattern(buf, sizeof(buf), 3000, 16);
	res("send 2000 after system()", send_all(fd, buf, sizeof(buf)));
	size_t got;
	uint64_t h = recv_count(fd, 6701, &got);
	say("received %zu bytes up to EOF, exact (client's 5000, shell's 700, client's 1000): %s",
	    got, yesno(got == 6700 && h == pattern_ck(6700, 17)));
	res("close", close(fd));
}

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
	int fd = client_conn();
	send_pattern(fd, 5000, 17);
	say("sent 5000 the server has not read");
	tell();
	await_peer();                           /* the server sent 3000 */
	fd = small_fd(fd);

	if (!mkdtemp(dir))
		fatal("mkdtemp");
	char in[64], out[64], buf[4000], want[4000];
	snprintf(in, sizeof(in), "%s/in", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	FILE *f = fopen(in, "w");
	pattern(buf, 700, 5000, 17);
	if (!f || fwrite(buf, 1, 700, f) != 700 || fclose(f))
		fatal("write %s", in);

	char cmd[256];
	snprintf(cmd, sizeof(cmd), "timeout 3 head -c 1000 <&%d >%s; cat %s >&%d", fd, out, in, fd);
	char *pre = getenv("LD_PRELOAD");
	pre = pre ? strdup(pre) : NULL;
	unsetenv("LD_PRELOAD");
	say("system(): head reads 1000, cat sends 700, without the library");
	int st = system(cmd);
	if (pre)
		setenv("LD_PRELOAD", pre, 1);
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

	tell();
	pattern(want, 4000, 1000, 16);
	ssize_t r = recv_all(fd, buf, 4000);
	say("client read %zd more (server's 1000..5000), exact: %s", r,
	    yesno(r == 4000 && !memcmp(buf, want, 4000)));
	pattern(buf, 1000, 5700, 17);
	res("send 1000 after system()", send_all(fd, buf, 1000));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	res("recv at EOF", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
