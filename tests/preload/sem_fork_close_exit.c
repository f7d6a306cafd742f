/* SPDX-License-Identifier: MIT */
/* The owner of a connection forks (the child holds the connection and
 * never touches it), closes its own fd with 70000 bytes the peer has not
 * read, and exits at once.  On TCP the bytes are in the kernel: the peer
 * reads all of them, then EOF when the child exits too.  Under shortcut the
 * close switches the connection to TCP (the child may use it) and the exit
 * waits for that switch to re-send the bytes. */
// expect: switched 2
#include "common.c"

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
	pid_t k = fork();
	if (k == 0) {
		msleep(500);            /* holds the connection, then exits */
		_exit(0);
	}
	res("close", close(fd));
	tell();
	fflush(t_out);
	exit(0);                        /* atexit handlers run */
}

int main(void)
{
	return run(server, client);
}
