/* SPDX-License-Identifier: MIT */
/* close_range() in a fork child and in the parent.  The child closes every
 * fd it inherited but the connection (and the test's own pipes), as
 * servers do before handing a socket to a helper, then goes on with the
 * connection: it must read what the parent left unread and write (the
 * owner, reached without any fd, switches the connection to TCP).  The
 * parent then closes another connection with close_range(): the peer
 * must see its end. */
// expect: switched 2
#include "common.h"

static void server(int lfd)
{
	int a = server_conn(lfd), b = server_conn(lfd);
	send_pattern(a, 1000, 61);
	await_peer();                   /* the child is done */
	size_t got;
	uint64_t h = recv_count(a, 500, &got);
	say("from the child: %zu bytes, exact: %s", got, yesno(got == 500 && h == pattern_ck(500, 63)));
	await_peer();                   /* the parent closed b */
	char buf[400];
	ssize_t n = recv_all(b, buf, sizeof(buf));
	char want[300];
	pattern(want, 300, 0, 62);
	say("b: %zd bytes then EOF (the parent's close_range), exact: %s", n,
	    yesno(n == 300 && !memcmp(buf, want, 300)));
	close(a);
	close(b);
}

static int cmp_int(const void *x, const void *y)
{
	return *(const int *)x - *(const int *)y;
}

static void client(void)
{
	int a = client_conn(), b = client_conn();
	char buf[1000], want[1000];
	send_pattern(b, 300, 62);
	pattern(want, 1000, 0, 61);
	res("parent: recv 100 of a", recv_all(a, buf, 100));
	fflush(t_out);
	pid_t k = fork();
	if (k == 0) {
		int keep[] = { 0, 1, 2, a, t_p2c[0], t_c2p[1], fileno(t_out) };
		int n = (int)(sizeof(keep) / sizeof(keep[0]));
		qsort(keep, (size_t)n, sizeof(int), cmp_int);
		for (int i = 0; i < n; i++) {
			unsigned lo = (unsigned)keep[i] + 1;
			unsigned hi = i + 1 < n ? (unsigned)keep[i + 1] - 1 : ~0u;
			if (lo <= hi && close_range(lo, hi, 0) < 0)
				say("child: close_range: %s", ename(errno));
		}
		say("child: b closed: %s", yesno(fcntl(b, F_GETFD) < 0));
		ssize_t r = recv_all(a, buf, 900);
		say("child: the other 900 of a: %zd, exact: %s", r,
		    yesno(r == 900 && !memcmp(buf, want + 100, 900)));
		char out[500];
		pattern(out, 500, 0, 63);
		res("child: send 500", send_all(a, out, 500));
		fflush(t_out);
		_exit(0);
	}
	int st;
	waitpid(k, &st, 0);
	say("the child exited 0: %s", yesno(WIFEXITED(st) && WEXITSTATUS(st) == 0));
	tell();
	res("parent: close_range(b, b)", close_range((unsigned)b, (unsigned)b, 0));
	tell();
	close(a);
}

int main(void)
{
	return run(server, client);
}
