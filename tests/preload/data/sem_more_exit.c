/* SPDX-License-Identifier: MIT */
/* Bytes held back by MSG_MORE or TCP_CORK are not lost when the writer
 * ends without sending more: the kernel sends what a process queued when
 * it exits (the fd closes) or dies, and the reader gets every byte, then
 * the end.  Also a close() straight after a corked send. */
#include "common.h"

static void reader(int fd, const char *what, size_t want, unsigned seed)
{
	size_t got;
	uint64_t h = recv_count(fd, 1u << 20, &got);
	say("%s: received %zu bytes up to EOF, exact: %s", what, got,
	    yesno(got == want && h == pattern_ck(want, seed)));
}

static void server(int lfd)
{
	int a = server_conn(lfd), c = server_conn(lfd), b = server_conn(lfd);
	reader(c, "close after a corked send", 3000, 33);
	reader(a, "MSG_MORE, then exit", 1000, 31);
	reader(b, "TCP_CORK, then killed", 70000, 32);
	close(a);
	close(b);
	close(c);
}

static void client(void)
{
	int a = client_conn(), c = client_conn();
	int one = 1;
	char buf[70000];

	res("setsockopt(TCP_CORK) on the second", setsockopt(c, IPPROTO_TCP, TCP_CORK, &one, sizeof(one)));
	pattern(buf, 3000, 0, 33);
	res("corked send of 3000", send(c, buf, 3000, 0));
	res("close", close(c));
	pattern(buf, 1000, 0, 31);
	res("send 1000 with MSG_MORE", send(a, buf, 1000, MSG_MORE));
	fflush(t_out);
	/* a child of ours connects, sends 70000 corked and dies by a signal */
	pid_t k = fork();
	if (k == 0) {
		close(a);
		int b = client_conn();
		setsockopt(b, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
		pattern(buf, 70000, 0, 32);
		send_all(b, buf, 70000);
		raise(SIGKILL);
	}
	int st;
	waitpid(k, &st, 0);
	say("the child was killed: %s", yesno(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
	fflush(t_out);
	_exit(0);               /* holding a, its bytes held back */
}

int main(void)
{
	return run(server, client);
}
