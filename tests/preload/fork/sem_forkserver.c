/* SPDX-License-Identifier: MIT */
/* A server that accepts, forks a process per connection and closes its own
 * copy (PostgreSQL, inetd-style servers): the child serves the connection
 * (banner first, then an echo), the parent's close ends nothing. */
#include "common.h"
#include <sys/wait.h>

static void server(int lfd)
{
	for (int round = 0; round < 2; round++) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			fatal("accept");
		pid_t pid = t_fork();
		if (pid == 0) {
			char buf[65536];
			if (send_all(fd, "220 ready\r\n", 11) != 11)
				_exit(3);
			uint64_t h = CK_INIT;
			size_t total = 0;
			ssize_t n;
			while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
				h = ck(h, buf, (size_t)n);
				total += (size_t)n;
				if (send_all(fd, buf, (size_t)n) != n)
					_exit(4);
			}
			close(fd);
			_exit(total == 300000 && h == pattern_ck(300000, 3) ? 0 : 5);
		}
		res("parent: close its copy", close(fd));
		int st;
		waitpid(pid, &st, 0);
		say("server: child %d served the connection: %s", round,
		    yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	}
}

static void client(void)
{
	for (int round = 0; round < 2; round++) {
		int fd = raw_connect();
		char banner[11];
		res("client: banner", recv_all(fd, banner, sizeof(banner)));
		say("client: banner ok: %s", yesno(!memcmp(banner, "220 ready\r\n", 11)));
		/* send and read back in pieces, 300000 bytes */
		char out[10000], in[10000];
		uint64_t h = CK_INIT;
		for (size_t off = 0; off < 300000; off += sizeof(out)) {
			pattern(out, sizeof(out), off, 3);
			if (send_all(fd, out, sizeof(out)) != (ssize_t)sizeof(out) ||
			    recv_all(fd, in, sizeof(in)) != (ssize_t)sizeof(in))
				fatal("exchange");
			h = ck(h, in, sizeof(in));
		}
		say("client: echo ok: %s", yesno(h == pattern_ck(300000, 3)));
		shutdown(fd, SHUT_WR);
		res("client: EOF after the child closed", recv(fd, in, 1, 0));
		close(fd);
	}
}

int main(void)
{
	return run(server, client);
}
