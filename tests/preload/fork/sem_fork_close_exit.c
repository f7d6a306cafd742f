/* SPDX-License-Identifier: MIT */
/* The owner of a connection forks (the child holds the connection and
 * never touches it), closes its own fd with 70000 bytes the peer has not
 * read, and exits at once.  On TCP the bytes are in the kernel: the peer
 * reads all of them, then EOF when the child exits too.  Under shortcut the
 * close switches the connection to TCP (the child may use it) and the exit
 * waits for that switch to re-send the bytes.  The child holds the
 * connection until its parent has exited (EOF on a pipe only the parent
 * holds open), not for a fixed time a busy machine can outlast. */
// expect: switched 2
#include "common.h"

static void server(int lfd)
{
	int fd = server_conn(lfd);
	await_peer();                   /* the client closed and is exiting */
	size_t got;
	uint64_t h = recv_count(fd, 1u << 20, &got);
	say("received %zu bytes up to EOF, exact: %s", got,
	    yesno(got == 70000 && h == pattern_ck(70000, 51)));
	close(fd);
}

static void client(void)
{
	int fd = client_conn();
	send_pattern(fd, 70000, 51);
	int held[2];
	if (pipe2(held, O_CLOEXEC) < 0)
		fatal("pipe");
	pid_t k = fork();
	if (k == 0) {
		/* holds the connection until the parent is gone, then exits */
		char x;
		close(held[1]);
		while (read(held[0], &x, 1) < 0 && errno == EINTR) {
		}
		_exit(0);
	}
	close(held[0]);                 /* held[1] closes when we exit */
	res("close", close(fd));
	tell();
	fflush(t_out);
	exit(0);                        /* atexit handlers run */
}

int main(void)
{
	return run(server, client);
}
