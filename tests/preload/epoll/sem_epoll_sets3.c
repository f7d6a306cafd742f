/* SPDX-License-Identifier: MIT */
/* One connection in three epoll sets of one process (under the interposer:
 * the first set binds it to its wake-up channel, the second gets a second
 * channel, the third watches the first set's channel fd): each set reports
 * it, a thread sleeping in the second or the third set alone is woken (the
 * first set never waits), DEL from the first set and ADD again, DEL/ADD with
 * EPOLLET in the second, a dup registered beside it in the second set,
 * closing the first set, and closing the fds (the entries live until the
 * last fd is closed; the peer sees EOF).  The bytes that must find a
 * thread asleep are sent once its state says it sleeps, not after a fixed
 * time. */
#include "common.h"
#include "epoll_common.h"
#include <pthread.h>
#include <sys/epoll.h>

enum { C_EOF = 10 };    /* client: wait for EOF on the connection */

/* a thread sleeping in epoll_wait on one set */
struct sleeper {
	pthread_t t;
	_Atomic pid_t tid;
	int ep, timeout;
	char line[512];
};

static pthread_mutex_t fmt_lock = PTHREAD_MUTEX_INITIALIZER;      /* pmask's buffers */

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;
	struct epoll_event ev[8];
	atomic_store(&s->tid, gettid());
	int n = epoll_wait(s->ep, ev, 8, s->timeout);
	int e = errno;
	pthread_mutex_lock(&fmt_lock);
	errno = e;
	fmt_events(s->line, sizeof(s->line), "", n, ev);
	pthread_mutex_unlock(&fmt_lock);
	return NULL;
}

static void sleeper_start(struct sleeper *s, int ep, int timeout)
{
	s->ep = ep;
	s->timeout = timeout;
	atomic_store(&s->tid, 0);
	if (pthread_create(&s->t, NULL, sleeper_run, s))
		fatal("pthread_create");
}

static void sleeper_end(struct sleeper *s, const char *label)
{
	pthread_join(s->t, NULL);
	say("%s%s", label, s->line);
}

/* a thread sleeping (no timeout) in one set alone is woken by n bytes */
static void sleep_in(int ep, const char *label, uint64_t n)
{
	struct sleeper s;
	sleeper_start(&s, ep, -1);
	wait_tid_asleep(&s.tid);
	cmd(C_SEND, 1, n);
	sleeper_end(&s, label);
}

static void server(int lfd)
{
	int c = server_conn(lfd);
	int e1 = epoll_create1(0), e2 = epoll_create1(0), e3 = epoll_create1(0);
	if (e1 < 0 || e2 < 0 || e3 < 0)
		fatal("epoll_create1");

	say("--- 1. C in sets 1, 2, 3 (level)");
	ctl("set 1: ADD C IN", e1, EPOLL_CTL_ADD, c, EPOLLIN, 1);
	ctl("set 2: ADD C IN", e2, EPOLL_CTL_ADD, c, EPOLLIN, 2);
	ctl("set 3: ADD C IN", e3, EPOLL_CTL_ADD, c, EPOLLIN, 3);
	wait_report(e1, "set 1, idle", 0);
	wait_report(e2, "set 2, idle", 0);
	wait_report(e3, "set 3, idle", 0);

	say("--- 2. each set reports, the later ones first");
	cmd(C_SEND, 1, 1);
	wait_report(e3, "set 3, C got 1", 2000);
	wait_report(e2, "set 2, C got 1", 2000);
	wait_report(e1, "set 1, C got 1", 2000);
	drain("C", c);
	wait_report(e3, "set 3, drained", 0);
	wait_report(e2, "set 2, drained", 0);
	wait_report(e1, "set 1, drained", 0);
	cmd(C_SEND_LATER, 1, 1);
	wait_report(e3, "set 3 sleeping, C gets 1", 3000);
	wait_report(e2, "set 2", 2000);
	wait_report(e1, "set 1", 2000);
	drain("C", c);

	say("--- 3. a thread sleeping in one set alone (set 1 never waits)");
	sleep_in(e2, "thread in set 2, C gets 2", 2);
	drain("C", c);
	sleep_in(e3, "thread in set 3, C gets 3", 3);
	drain("C", c);
	wait_report(e1, "set 1, drained", 0);
	wait_report(e2, "set 2, drained", 0);
	wait_report(e3, "set 3, drained", 0);

	say("--- 4. DEL C from set 1 (the first set)");
	ctl("set 1: DEL C", e1, EPOLL_CTL_DEL, c, 0, 0);
	cmd(C_SEND, 1, 4);
	wait_report(e2, "set 2, C got 4", 2000);
	wait_report(e3, "set 3, C got 4", 2000);
	wait_report(e1, "set 1 (deleted)", 200);
	drain("C", c);
	cmd(C_SEND_LATER, 1, 5);
	wait_report(e3, "set 3 sleeping, C gets 5", 3000);
	wait_report(e2, "set 2", 2000);
	drain("C", c);
	sleep_in(e2, "thread in set 2, C gets 6", 6);
	drain("C", c);
	sleep_in(e3, "thread in set 3, C gets 7", 7);
	drain("C", c);

	say("--- 5. ADD C to set 1 again");
	ctl("set 1: ADD C IN", e1, EPOLL_CTL_ADD, c, EPOLLIN, 1);
	wait_report(e1, "set 1, idle", 0);
	cmd(C_SEND, 1, 8);
	wait_report(e3, "set 3, C got 8", 2000);
	wait_report(e2, "set 2, C got 8", 2000);
	wait_report(e1, "set 1, C got 8", 2000);
	drain("C", c);
	sleep_in(e1, "thread in set 1, C gets 9", 9);
	drain("C", c);
	sleep_in(e3, "thread in set 3, C gets 10", 10);
	drain("C", c);

	say("--- 6. DEL C from set 2, ADD it again with EPOLLET");
	ctl("set 2: DEL C", e2, EPOLL_CTL_DEL, c, 0, 0);
	ctl("set 2: ADD C IN|ET", e2, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLET, 2);
	wait_report(e2, "set 2, idle", 0);
	cmd(C_SEND, 1, 11);
	wait_report(e2, "set 2 (ET), C got 11", 2000);
	wait_report(e2, "set 2, edge consumed", 0);
	wait_report(e1, "set 1", 2000);
	wait_report(e3, "set 3", 2000);
	wait_report(e1, "set 1 again", 2000);
	wait_report(e2, "set 2, still no new edge", 0);
	drain("C", c);
	sleep_in(e2, "thread in set 2 (ET), C gets 12", 12);
	wait_report(e2, "set 2, edge consumed", 0);
	drain("C", c);

	say("--- 7. a dup C2 in set 2 beside the EPOLLET entry");
	int c2 = dup(c);
	say("dup: new fd: %s", yesno(c2 >= 0 && c2 != c));
	ctl("set 2: ADD C2 IN", e2, EPOLL_CTL_ADD, c2, EPOLLIN, 22);
	wait_report(e2, "set 2, idle", 0);
	cmd(C_SEND, 1, 13);
	wait_report(e2, "set 2, C got 13 (new edge)", 2000);
	wait_report(e2, "set 2, edge consumed", 0);
	cmd(C_SEND, 1, 14);
	wait_report(e2, "set 2, 14 more unread (new edge)", 2000);
	wait_report(e2, "set 2, edge consumed", 0);
	wait_report(e1, "set 1", 2000);
	wait_report(e3, "set 3", 2000);
	drain("C2", c2);
	wait_report(e2, "set 2, drained", 0);
	sleep_in(e2, "thread in set 2, C gets 15", 15);
	drain("C", c);

	say("--- 8. close set 1 (the set C joined first)");
	res("close set 1", close(e1));
	cmd(C_SEND, 1, 16);
	wait_report(e2, "set 2, C got 16", 2000);
	wait_report(e3, "set 3, C got 16", 2000);
	wait_report(e2, "set 2 again", 0);
	drain("C", c);
	wait_report(e2, "set 2, drained", 0);
	wait_report(e3, "set 3, drained", 0);
	cmd(C_SEND_LATER, 1, 17);
	wait_report(e3, "set 3 sleeping, C gets 17", 3000);
	wait_report(e2, "set 2", 2000);
	drain("C", c);
	cmd(C_SEND_LATER, 1, 18);
	wait_report(e2, "set 2 sleeping, C gets 18", 3000);
	wait_report(e3, "set 3", 2000);
	drain("C", c);
	sleep_in(e3, "thread in set 3, C gets 19", 19);
	drain("C", c);
	sleep_in(e2, "thread in set 2, C gets 20", 20);
	drain("C", c);

	say("--- 9. close C2, then C (the last fd)");
	res("close C2 (C remains)", close(c2));
	cmd(C_SEND, 1, 21);
	wait_report(e2, "set 2, C got 21 (C2's entry lives on)", 2000);
	wait_report(e3, "set 3, C got 21", 2000);
	drain("C", c);
	wait_report(e2, "set 2, drained", 0);
	wait_report(e3, "set 3, drained", 0);
	res("close C (the last fd)", close(c));
	wait_report(e2, "set 2, C closed", 0);
	wait_report(e3, "set 3, C closed", 0);
	res("set 2: DEL C (closed)", epoll_ctl(e2, EPOLL_CTL_DEL, c, NULL));
	cmd(C_EOF, 1, 0);
	wait_report(e2, "set 2, after the peer's EOF", 200);
	wait_report(e3, "set 3, after the peer's EOF", 200);

	tell_u64(C_END);
	tell_u64(0);
	tell_u64(0);
	close(e2);
	close(e3);
}

/* the server drives: C_SEND / C_SEND_LATER n bytes, C_EOF, C_END */
static void client(void)
{
	int fd = client_conn();
	char buf[64];
	long sent = 0;
	memset(buf, 's', sizeof(buf));
	for (;;) {
		uint64_t c = await_u64(), conn = await_u64(), n = await_u64();
		(void)conn;
		if (c == C_END)
			break;
		switch (c) {
		case C_SEND:
			if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
				fatal("send");
			sent += (long)n;
			break;
		case C_SEND_LATER:              /* once the server sleeps in its wait */
			tell();
			await_peer_asleep();
			if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
				fatal("send");
			sent += (long)n;
			continue;
		case C_EOF: {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int pr = poll(&p, 1, 5000);
			say("poll for the server's close = %d revents has IN: %s", pr,
			    yesno(pr > 0 && (p.revents & POLLIN)));
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r < 0)
				say("recv after the server closed = -1 %s", ename(errno));
			else
				say("recv after the server closed = %ld", (long)r);
			say("EOF: %s", yesno(r == 0));
			break;
		}
		}
		tell();
	}
	say("sent %ld bytes", sent);
	res("close", close(fd));
}

int main(void)
{
	return run(server, client);
}
