/* SPDX-License-Identifier: MIT */
/* Accept, use, fork, close (a pre-forking server that reads the request
 * before handing the connection to a worker): the server accepts, reads a
 * 100-byte request, forks a handler and closes its own copy at once.  The
 * close ends nothing: the client sees no EOF (poll for 300 ms returns 0)
 * while the handler holds the connection; the handler then sends the
 * response (20000), reads a second request (500), answers (3000) and closes;
 * the client gets everything exact and in order, then EOF.  The owner's
 * close while a child forked afterwards holds the connection switches it
 * back to TCP, so two halves switch. */
// expect: switched 2
#include "common.h"

/* client -> server, seed 61: 0..100 (request 1), 100..600 (request 2);
 * server -> client, seed 62: 0..20000 (response), 20000..23000 (answer) */

static void server(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	say("request 1 (100), exact: %s", yesno(recv_exact_at(fd, 0, 100, 61)));
	pid_t pid = t_fork();
	if (pid == 0) {
		alarm(20);
		t_pid = 0;                      /* fatal() here must not kill the client */
		close(lfd);
		await_peer();                   /* the client polled: no EOF */
		send_at(fd, 0, 20000, 62);
		say("handler: sent the response (20000)");
		bool ok = recv_exact_at(fd, 100, 500, 61);
		say("handler: request 2 (500), exact: %s", yesno(ok));
		send_at(fd, 20000, 3000, 62);
		say("handler: sent the answer (3000)");
		res("handler: close", close(fd));
		fflush(stdout);
		_exit(ok ? 0 : 2);
	}
	res("parent: close its copy", close(fd));
	tell();
	int st;
	if (waitpid(pid, &st, 0) != pid)
		fatal("waitpid");
	say("parent: the handler ran to the end: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

static void client(void)
{
	int fd = raw_connect();
	send_at(fd, 0, 100, 61);
	say("sent request 1 (100)");
	await_peer();                           /* the server's parent closed its copy */
	poll1("after the server parent's close, the handler alive (300 ms)", fd, POLLIN, 300);
	tell();
	say("the response (20000), exact: %s", yesno(recv_exact_at(fd, 0, 20000, 62)));
	send_at(fd, 100, 500, 61);
	say("sent request 2 (500)");
	say("the answer (3000), exact: %s", yesno(recv_exact_at(fd, 20000, 3000, 62)));
	char c;
	res("recv at EOF", recv(fd, &c, 1, 0));
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
