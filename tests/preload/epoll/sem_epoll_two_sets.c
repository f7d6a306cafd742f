/* SPDX-License-Identifier: MIT */
/* One connection in two epoll sets, and one connection both in an epoll
 * set and given to poll()/select(): each set reports it by its own
 * registration (level in one and EPOLLET or EPOLLONESHOT in the other, DEL
 * from one leaves the other, MOD re-arms one), two threads sleeping in the
 * two sets are both woken, closing the fd removes it from both; poll() and
 * select() neither consume an EPOLLET edge nor are hidden by one, and a
 * thread sleeping in poll() and another in epoll_wait() on the same fd are
 * both woken.  (Closing the set a connection joined first:
 * sem_epoll_two_sets_close.c.)  The bytes that must find a thread asleep
 * are sent once its state says it sleeps, not after a fixed time. */
#include "common.h"
#include "epoll_common.h"
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/select.h>

static int conns[8];

/* a thread sleeping in epoll_wait (ep >= 0) or poll (on fd) */
struct sleeper {
	pthread_t t;
	_Atomic pid_t tid;
	int ep, fd, timeout;
	char line[512];
};

static pthread_mutex_t fmt_lock = PTHREAD_MUTEX_INITIALIZER;      /* pmask's buffers */

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;
	atomic_store(&s->tid, gettid());
	if (s->ep >= 0) {
		struct epoll_event ev[8];
		int n = epoll_wait(s->ep, ev, 8, s->timeout);
		int e = errno;
		pthread_mutex_lock(&fmt_lock);
		errno = e;
		fmt_events(s->line, sizeof(s->line), "", n, ev);
		pthread_mutex_unlock(&fmt_lock);
	} else {
		struct pollfd p = { .fd = s->fd, .events = POLLIN };
		int n = poll(&p, 1, s->timeout);
		pthread_mutex_lock(&fmt_lock);
		if (n < 0)
			snprintf(s->line, sizeof(s->line), ": poll = -1 %s", ename(errno));
		else
			snprintf(s->line, sizeof(s->line), ": poll = %d revents=%s", n, pmask(p.revents));
		pthread_mutex_unlock(&fmt_lock);
	}
	return NULL;
}

static void sleeper_start(struct sleeper *s, int ep, int fd, int timeout)
{
	s->ep = ep;
	s->fd = fd;
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

static void sel(const char *label, int fd)
{
	fd_set r;
	FD_ZERO(&r);
	FD_SET(fd, &r);
	struct timeval tv = { 1, 0 };
	int rc = select(fd + 1, &r, NULL, NULL, &tv);
	if (rc < 0)
		say("%s: select = -1 %s", label, ename(errno));
	else
		say("%s: select = %d readable %s", label, rc, yesno(FD_ISSET(fd, &r)));
}

static void server(int lfd)
{
	cmd_connect(lfd, conns, 3);
	int a = conns[1], b = conns[2], c = conns[3];
	int e1 = epoll_create1(0), e2 = epoll_create1(0);
	if (e1 < 0 || e2 < 0)
		fatal("epoll_create1");

	say("--- connection A in sets 1 and 2, connection B in set 2");
	ctl("set 1: ADD A IN", e1, EPOLL_CTL_ADD, a, EPOLLIN, 11);
	ctl("set 2: ADD A IN", e2, EPOLL_CTL_ADD, a, EPOLLIN, 21);
	ctl("set 2: ADD B IN", e2, EPOLL_CTL_ADD, b, EPOLLIN, 22);
	wait_report(e1, "set 1, idle", 100);
	wait_report(e2, "set 2, idle", 100);
	cmd(C_SEND, 1, 5);
	wait_report(e1, "set 1, A got 5", 1000);
	wait_report(e2, "set 2, A got 5", 1000);
	wait_report(e1, "set 1 again", 1000);
	drain("A", a);
	wait_report(e1, "set 1, drained", 100);
	wait_report(e2, "set 2, drained", 100);
	cmd(C_SEND, 2, 6);
	wait_report(e2, "set 2, B got 6", 1000);
	wait_report(e1, "set 1, B got 6", 100);
	drain("B", b);
	cmd(C_SEND, 1, 2);
	cmd(C_SEND, 2, 2);
	wait_report(e2, "set 2, both got 2", 1000);
	wait_report(e1, "set 1, both got 2", 1000);
	drain("A", a);
	drain("B", b);

	say("--- EPOLLET in set 1, level in set 2");
	ctl("set 1: MOD A IN|ET", e1, EPOLL_CTL_MOD, a, EPOLLIN | EPOLLET, 12);
	cmd(C_SEND, 1, 3);
	wait_report(e1, "set 1, A got 3", 1000);
	wait_report(e1, "set 1, no new edge", 100);
	wait_report(e2, "set 2", 1000);
	wait_report(e2, "set 2 again", 1000);
	wait_report(e1, "set 1 after set 2 reported", 100);
	cmd(C_SEND, 1, 3);
	wait_report(e2, "set 2, A got 3 more", 1000);
	wait_report(e1, "set 1, new edge", 1000);
	drain("A", a);

	say("--- EPOLLONESHOT in set 2");
	ctl("set 2: MOD A IN|ONESHOT", e2, EPOLL_CTL_MOD, a, EPOLLIN | EPOLLONESHOT, 23);
	cmd(C_SEND, 1, 4);
	wait_report(e2, "set 2, A got 4", 1000);
	wait_report(e2, "set 2, disabled", 100);
	wait_report(e1, "set 1 (ET)", 1000);
	drain("A", a);
	ctl("set 1: DEL A", e1, EPOLL_CTL_DEL, a, 0, 0);
	cmd(C_SEND, 1, 1);
	wait_report(e1, "set 1, A deleted, got 1", 100);
	wait_report(e2, "set 2, disabled", 100);
	ctl("set 2: MOD A IN (level)", e2, EPOLL_CTL_MOD, a, EPOLLIN, 24);
	wait_report(e2, "set 2, re-armed", 1000);
	drain("A", a);

	say("--- sleeping in each set");
	ctl("set 1: ADD A IN", e1, EPOLL_CTL_ADD, a, EPOLLIN, 13);
	cmd(C_SEND_LATER, 1, 7);
	wait_report(e2, "set 2 sleeping, A gets 7", 3000);
	wait_report(e1, "set 1", 1000);
	drain("A", a);
	struct sleeper s1, s2;
	sleeper_start(&s1, e1, -1, 3000);
	sleeper_start(&s2, e2, -1, 3000);
	wait_tid_asleep(&s1.tid);
	wait_tid_asleep(&s2.tid);
	cmd(C_SEND, 1, 8);
	sleeper_end(&s1, "thread in set 1, A gets 8");
	sleeper_end(&s2, "thread in set 2, A gets 8");
	drain("A", a);
	sleeper_start(&s1, e1, -1, 1000);
	sleeper_start(&s2, e2, -1, 3000);
	wait_tid_asleep(&s1.tid);
	wait_tid_asleep(&s2.tid);
	cmd(C_SEND, 2, 9);
	sleeper_end(&s1, "thread in set 1 (1 s), B gets 9");
	sleeper_end(&s2, "thread in set 2, B gets 9");
	drain("B", b);

	say("--- closing A removes it from both sets");
	cmd(C_SEND, 1, 1);
	wait_report(e1, "set 1, A got 1", 1000);
	wait_report(e2, "set 2, A got 1", 1000);
	res("close A (unread data)", close(a));
	wait_report(e1, "set 1, A closed", 100);
	wait_report(e2, "set 2, A closed", 100);

	say("--- connection C in set 1 (EPOLLET) and given to poll/select");
	ctl("set 1: ADD C IN|ET", e1, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLET, 31);
	poll1("poll C, idle", c, POLLIN, 100);
	cmd(C_SEND, 3, 5);
	poll1("poll C, got 5", c, POLLIN, 1000);
	poll1("poll C again", c, POLLIN, 1000);
	sel("select C", c);
	wait_report(e1, "set 1 after poll and select", 1000);
	wait_report(e1, "set 1, no new edge", 100);
	poll1("poll C after the edge", c, POLLIN, 1000);
	drain("C", c);
	cmd(C_SEND_LATER, 3, 5);
	poll1("poll C sleeping, gets 5 more", c, POLLIN, 3000);
	wait_report(e1, "set 1, new edge", 1000);
	drain("C", c);
	poll1("poll C, drained", c, POLLIN, 100);
	wait_report(e1, "set 1, drained", 100);
	cmd(C_SEND_LATER, 3, 6);
	sel("select C sleeping, gets 6", c);
	wait_report(e1, "set 1, new edge", 1000);
	drain("C", c);

	struct sleeper sp;
	sleeper_start(&sp, -1, c, 3000);
	sleeper_start(&s1, e1, -1, 3000);
	wait_tid_asleep(&sp.tid);
	wait_tid_asleep(&s1.tid);
	cmd(C_SEND, 3, 7);
	sleeper_end(&sp, "thread in poll, C gets 7");
	sleeper_end(&s1, "thread in set 1, C gets 7");
	drain("C", c);
	poll1("poll C for OUT", c, POLLOUT, 1000);
	wait_report(e1, "set 1, nothing new", 100);

	tell_u64(C_END);
	tell_u64(0);
	tell_u64(0);
	close(b);
	close(c);
	close(e1);
	close(e2);
}

static void client(void)
{
	cmd_client('t');
}

int main(void)
{
	return run(server, client);
}
