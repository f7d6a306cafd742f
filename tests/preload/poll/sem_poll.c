/* SPDX-License-Identifier: MIT */
/* poll/ppoll/select/pselect readiness: nothing before data (timeouts of
 * 100 ms return 0), POLLIN after the peer sends, IN|RDHUP after its
 * SHUT_WR, HUP once both directions are shut, POLLOUT on a fresh
 * connection; a pipe in the same call. */
#include "common.h"
#include <sys/select.h>

static void sel(const char *label, int fd, bool rd, bool wr, int timeout_ms)
{
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	if (rd)
		FD_SET(fd, &r);
	if (wr)
		FD_SET(fd, &w);
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int rc = select(fd + 1, &r, &w, NULL, &tv);
	if (rc < 0)
		say("%s: select = -1 %s", label, ename(errno));
	else
		say("%s: select = %d readable %s writable %s", label, rc, yesno(FD_ISSET(fd, &r)),
		    yesno(FD_ISSET(fd, &w)));
}

static void server(int lfd)
{
	int fd = server_conn(lfd);
	char buf[100];
	int pp[2];
	if (pipe(pp) < 0)
		fatal("pipe");

	poll1("fresh, POLLOUT", fd, POLLOUT, 1000);
	poll1("idle, POLLIN", fd, POLLIN | POLLRDHUP, 100);
	sel("idle, read", fd, true, false, 100);
	sel("fresh, read+write", fd, true, true, 100);
	struct timespec ts = { 0, 100000000 };
	struct pollfd p = { .fd = fd, .events = POLLIN };
	res("ppoll idle 100ms", ppoll(&p, 1, &ts, NULL));
	fd_set r;
	FD_ZERO(&r);
	FD_SET(fd, &r);
	res("pselect idle 100ms", pselect(fd + 1, &r, NULL, NULL, &ts, NULL));

	/* a pipe and the socket in one call */
	if (write(pp[1], "p", 1) != 1)
		fatal("pipe write");
	struct pollfd two[3] = { { .fd = fd, .events = POLLIN }, { .fd = -1, .events = POLLIN },
				 { .fd = pp[0], .events = POLLIN } };
	int rc = poll(two, 3, 1000);
	say("socket+ignored+pipe: poll = %d, revents %s / %s / %s", rc, pmask(two[0].revents),
	    pmask(two[1].revents), pmask(two[2].revents));

	tell();                                 /* client: send 5 */
	await_peer();
	poll1("after peer sent", fd, POLLIN | POLLRDHUP, 1000);
	sel("after peer sent, read", fd, true, false, 1000);
	rc = poll(two, 3, 1000);
	say("socket+ignored+pipe: poll = %d, revents %s / %s / %s", rc, pmask(two[0].revents),
	    pmask(two[1].revents), pmask(two[2].revents));
	if (read(pp[0], buf, 1) != 1)
		fatal("pipe read");
	rc = poll(two, 3, 1000);
	say("socket+ignored+pipe: poll = %d, revents %s / %s / %s", rc, pmask(two[0].revents),
	    pmask(two[1].revents), pmask(two[2].revents));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	poll1("drained", fd, POLLIN | POLLRDHUP, 100);

	tell();                                 /* client: SHUT_WR */
	await_peer();
	poll1("after peer SHUT_WR", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	sel("after peer SHUT_WR, read+write", fd, true, true, 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	poll1("after reading EOF", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	poll1("both directions shut", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	tell();
	await_peer();
	poll1("peer closed", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	res("close", close(fd));
	close(pp[0]);
	close(pp[1]);
}

static void client(void)
{
	int fd = client_conn();
	char buf[100];

	await_peer();
	poll1("before sending", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	res("send 5", send(fd, "abcde", 5, 0));
	tell();
	await_peer();
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	poll1("after own SHUT_WR", fd, POLLIN | POLLOUT | POLLRDHUP, 0);
	sel("after own SHUT_WR, read+write", fd, true, true, 0);
	tell();
	await_peer();                           /* server shut its side too */
	poll1("both directions shut", fd, POLLIN | POLLOUT | POLLRDHUP, 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));
	tell();
}

int main(void)
{
	return run(server, client);
}
