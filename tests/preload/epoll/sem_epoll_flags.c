/* SPDX-License-Identifier: MIT */
/* epoll event flags beyond sem_epoll.c: an EPOLLET registration wanting
 * IN|OUT gets the whole current mask at each edge (IN|OUT when data
 * arrives); EPOLLRDHUP/EPOLLHUP/EPOLLERR after the peer's shutdown(SHUT_WR),
 * close, abortive close (SO_LINGER {1,0}), after a send into a closed peer
 * (its RST) and after the peer process is killed (with and without unread
 * data); a registration with no events still gets HUP/ERR; EPOLLONESHOT
 * with EPOLLOUT and EPOLLET re-armed by MOD; a new EPOLLOUT edge after the
 * writer filled the connection until EAGAIN and the peer drained it;
 * epoll_pwait2; a signal handled with SA_RESTART interrupts epoll_wait,
 * epoll_pwait, poll and select (EINTR) but not a blocking recv, and a
 * signal blocked by epoll_pwait's mask does not interrupt it.
 *
 * Made to hold by construction, not by timing: the connection filled until
 * EAGAIN has fixed buffers (SO_SNDBUF on the writer, SO_RCVBUF on the
 * reader before it connects), so the kernel's autotuning cannot open room
 * after the writer saw EAGAIN; the peer's RST, close or death is waited for
 * (poll for POLLERR / POLLRDHUP) before the set is asked; "the peer sends
 * during the wait" sends once the server sleeps in the call; the blocking
 * recv that signals interrupt gets its data once a signal has hit it and
 * it went on waiting. */
#include "epoll_common.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sys/select.h>

enum { F_CONNECT = 1, F_SEND, F_SHUTWR, F_CLOSE, F_ABORT, F_DRAIN, F_SEND_LATER,
       F_GC_CONNECT, F_GC_KILL, F_CONNECT_SMALL, F_SEND_AFTER_HIT, F_END };

#define SMALL_BUF 65536         /* SO_SNDBUF / SO_RCVBUF of the connection filled */

static int ep;

/* the client does c (one of its own commands, F_*; with argument arg) and
 * answers when done */
static void fcmd(uint64_t c, uint64_t arg)
{
	tell_u64(c);
	tell_u64(arg);
	await_peer();
}

static int new_conn(int lfd)
{
	tell_u64(F_CONNECT);
	tell_u64(0);
	int fd = server_conn(lfd);
	await_peer();
	return fd;
}

/* a connection with fixed buffers: SO_RCVBUF on the client's socket before
 * it connects, SO_SNDBUF on ours */
static int new_conn_small(int lfd)
{
	tell_u64(F_CONNECT_SMALL);
	tell_u64(0);
	int fd = server_conn(lfd);
	await_peer();
	int v = SMALL_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
		fatal("SO_SNDBUF");
	return fd;
}

static void so_error(int fd)
{
	int err = -1;
	socklen_t l = sizeof(err);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
		say("SO_ERROR: getsockopt = -1 %s", ename(errno));
	else
		say("SO_ERROR = %s", err ? ename(err) : "0");
}

/* ---- signals ---------------------------------------------------------------- */

static atomic_int sig_count, sig_run, sig_hit_first;
static pthread_t main_thread, sig_thread;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&sig_count, 1);
}

/* SIGUSR1 to the main thread every 50 ms while sig_run is set (a signal
 * that comes before the call only runs the handler; the next one hits) */
static void *sig_loop(void *arg)
{
	(void)arg;
	if (atomic_load(&sig_hit_first)) {
		/* first one signal into the blocking call the main thread is
		 * in (its state), then, once it handled it and sleeps again,
		 * the client may send (F_SEND_AFTER_HIT) */
		wait_thread_asleep(getpid());
		pthread_kill(main_thread, SIGUSR1);
		for (long t0 = t_now_ms(); !atomic_load(&sig_count); msleep(1))
			if (t_now_ms() - t0 > T_GUARD_MS)
				fatal("the signal was not handled");
		wait_thread_asleep(getpid());
		tell();
	}
	while (atomic_load(&sig_run)) {
		msleep(50);
		if (atomic_load(&sig_run))
			pthread_kill(main_thread, SIGUSR1);
	}
	return NULL;
}

static void signals_start(void)
{
	atomic_store(&sig_count, 0);
	atomic_store(&sig_run, 1);
	atomic_store(&sig_hit_first, 0);
	if (pthread_create(&sig_thread, NULL, sig_loop, NULL))
		fatal("pthread_create");
}

/* the same, the first signal once the main thread sleeps in its call */
static void signals_start_hit(void)
{
	atomic_store(&sig_count, 0);
	atomic_store(&sig_run, 1);
	atomic_store(&sig_hit_first, 1);
	if (pthread_create(&sig_thread, NULL, sig_loop, NULL))
		fatal("pthread_create");
}

static void signals_stop(void)
{
	atomic_store(&sig_run, 0);
	pthread_join(sig_thread, NULL);
}

static void set_handler(int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

/* ---- the scenarios ---------------------------------------------------------- */

static void server(int lfd)
{
	char buf[65536];
	ep = epoll_create1(0);
	if (ep < 0)
		fatal("epoll_create1");

	say("--- EPOLLET with IN|OUT|RDHUP: the whole mask at each edge; peer SHUT_WR");
	int fd = new_conn(lfd);
	ctl("ADD IN|OUT|RDHUP|ET", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 1);
	wait_report(ep, "fresh", 1000);
	wait_report(ep, "no new edge", 100);
	fcmd(F_SEND, 5);
	wait_report(ep, "peer sent 5", 1000);
	wait_report(ep, "no new edge", 100);
	fcmd(F_SEND, 5);
	wait_report(ep, "peer sent 5 more", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	wait_report(ep, "after reading", 100);
	fcmd(F_SHUTWR, 0);
	wait_report(ep, "peer SHUT_WR", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	wait_report(ep, "after reading EOF", 100);
	res("send 3 (peer only shut its sending side)", send(fd, "abc", 3, MSG_NOSIGNAL));
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	msleep(100);
	wait_report(ep, "both directions shut", 0);
	wait_report(ep, "no new edge", 100);
	fcmd(F_CLOSE, 0);
	msleep(100);
	ctl("MOD IN|OUT|RDHUP (level)", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 1);
	wait_report(ep, "peer closed too, level", 0);
	res("close", close(fd));

	say("--- a registration with no events: only HUP/ERR");
	fd = new_conn(lfd);
	ctl("ADD 0", ep, EPOLL_CTL_ADD, fd, 0, 2);
	wait_report(ep, "fresh", 100);
	fcmd(F_SEND, 7);
	wait_report(ep, "peer sent 7", 100);
	/* (the peer's SHUT_WR, not its close: a closed peer's orphaned socket
	 * may answer our FIN with a reset when the kernel is short of memory
	 * for orphans, and the kernel's transcript then shows ERR) */
	fcmd(F_SHUTWR, 0);
	wait_report(ep, "peer shut down writing (FIN)", 100);
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
	msleep(100);
	wait_report(ep, "both directions shut", 1000);
	ctl("MOD IN|RDHUP", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP, 2);
	wait_report(ep, "asking for IN|RDHUP", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));

	say("--- peer's abortive close (SO_LINGER {1,0})");
	fd = new_conn(lfd);
	int fd2 = new_conn(lfd);
	ctl("ADD IN|RDHUP", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, 3);
	ctl("ADD second connection, 0", ep, EPOLL_CTL_ADD, fd2, 0, 4);
	ctl("ADD second connection again", ep, EPOLL_CTL_ADD, fd2, 0, 4);
	int fd2d = dup(fd2);
	ctl("ADD a duplicate of it, ET IN|OUT|RDHUP", ep, EPOLL_CTL_ADD, fd2d,
	    EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, 5);
	wait_report(ep, "fresh", 1000);
	fcmd(F_ABORT, 0);                        /* aborts the newest connection (fd2) */
	fcmd(F_ABORT, 0);                        /* then the older one (fd) */
	wait_ev(fd2, POLLERR);                  /* both resets have arrived */
	wait_ev(fd, POLLERR);
	wait_report(ep, "both aborted", 1000);
	wait_report(ep, "again (ET reported, level ones stay)", 100);
	res("recv (first)", recv(fd, buf, sizeof(buf), 0));
	wait_report(ep, "first: error taken by recv", 100);
	res("recv (first)", recv(fd, buf, sizeof(buf), 0));
	so_error(fd2);
	wait_report(ep, "second: error taken by SO_ERROR", 100);
	res("send (second)", send(fd2, "x", 1, MSG_NOSIGNAL));
	res("close first", close(fd));
	res("close second", close(fd2));
	wait_report(ep, "second still open through its duplicate", 100);
	res("close duplicate", close(fd2d));
	wait_report(ep, "all closed", 100);

	say("--- a send into a closed peer brings its RST");
	fd = new_conn(lfd);
	ctl("ADD IN|OUT|RDHUP", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 6);
	fcmd(F_CLOSE, 0);
	wait_report(ep, "peer closed", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("send 1", send(fd, "z", 1, MSG_NOSIGNAL));
	wait_ev(fd, POLLERR);                   /* the peer's RST has arrived */
	wait_report(ep, "after the peer's RST", 1000);
	so_error(fd);
	wait_report(ep, "error taken", 100);
	res("send 1", send(fd, "z", 1, MSG_NOSIGNAL));
	res("close", close(fd));

	say("--- EPOLLONESHOT with EPOLLOUT and EPOLLET, re-armed by MOD");
	fd = new_conn(lfd);
	ctl("ADD OUT|ONESHOT", ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLONESHOT, 7);
	wait_report(ep, "oneshot OUT", 1000);
	wait_report(ep, "disabled", 100);
	ctl("MOD OUT|ONESHOT", ep, EPOLL_CTL_MOD, fd, EPOLLOUT | EPOLLONESHOT, 8);
	wait_report(ep, "re-armed", 1000);
	wait_report(ep, "disabled", 100);
	ctl("MOD IN|ONESHOT (no data)", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 9);
	wait_report(ep, "nothing to read", 100);
	fcmd(F_SEND, 3);
	wait_report(ep, "peer sent 3", 1000);
	fcmd(F_SEND, 3);
	wait_report(ep, "disabled, more data", 100);
	ctl("MOD IN|OUT|ONESHOT|ET (data pending)", ep, EPOLL_CTL_MOD, fd,
	    EPOLLIN | EPOLLOUT | EPOLLONESHOT | EPOLLET, 10);
	wait_report(ep, "re-armed with data pending", 1000);
	wait_report(ep, "disabled", 100);
	ctl("MOD IN|ET (data pending)", ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLET, 11);
	wait_report(ep, "MOD gives an edge", 1000);
	wait_report(ep, "no new edge", 100);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	ctl("DEL", ep, EPOLL_CTL_DEL, fd, 0, 0);
	res("close", close(fd));

	say("--- a new EPOLLOUT edge after EAGAIN");
	fd = new_conn_small(lfd);
	res("fcntl O_NONBLOCK", fcntl(fd, F_SETFL, O_NONBLOCK));
	ctl("ADD OUT|ET", ep, EPOLL_CTL_ADD, fd, EPOLLOUT | EPOLLET, 12);
	wait_report(ep, "fresh", 1000);
	{
		/* write until EAGAIN, until a wait says nothing for 200 ms */
		uint64_t sent = 0, h = CK_INIT;
		for (int round = 0; round < 1000; round++) {
			for (;;) {
				size_t k = 65536;
				pattern(buf, k, sent, 21);
				ssize_t w = send(fd, buf, k, MSG_NOSIGNAL);
				if (w < 0 && errno == EAGAIN)
					break;
				if (w <= 0)
					fatal("fill");
				h = ck(h, buf, (size_t)w);
				sent += (uint64_t)w;
			}
			struct epoll_event e;
			if (epoll_wait(ep, &e, 1, 200) == 0)
				break;
		}
		say("filled until EAGAIN, no EPOLLOUT for 200 ms");
		tell_u64(F_DRAIN);
		tell_u64(sent);
		tell_u64(h);
		await_peer();
	}
	wait_report(ep, "peer drained", 1000);
	wait_report(ep, "no new edge", 100);
	ctl("MOD OUT (level)", ep, EPOLL_CTL_MOD, fd, EPOLLOUT, 12);
	wait_report(ep, "level", 1000);
	res("close", close(fd));


	say("--- signals (SIGUSR1 handled with SA_RESTART)");
	main_thread = pthread_self();
	set_handler(SA_RESTART);
	fd = new_conn(lfd);
	ctl("ADD IN", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 14);
	{
		struct epoll_event ev[4];
		signals_start();
		res("epoll_wait(5000)", epoll_wait(ep, ev, 4, 5000));
		signals_stop();
		say("handler ran: %s", yesno(atomic_load(&sig_count) > 0));
		signals_start();
		res("epoll_wait(-1)", epoll_wait(ep, ev, 4, -1));
		signals_stop();
		sigset_t none;
		sigemptyset(&none);
		signals_start();
		res("epoll_pwait(5000, empty mask)", epoll_pwait(ep, ev, 4, 5000, &none));
		signals_stop();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		signals_start();
		res("poll(5000)", poll(&p, 1, 5000));
		signals_stop();
		fd_set r;
		FD_ZERO(&r);
		FD_SET(fd, &r);
		struct timeval tv = { 5, 0 };
		signals_start();
		res("select(5 s)", select(fd + 1, &r, NULL, NULL, &tv));
		signals_stop();

		/* SIGUSR1 blocked by the mask during the wait: the data ends it */
		sigset_t usr1;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		fcmd(F_SEND_LATER, 4);
		signals_start();
		int n = epoll_pwait(ep, ev, 4, 5000, &usr1);
		signals_stop();
		res("epoll_pwait(5000, SIGUSR1 blocked), peer sends during the wait", n);
		if (n > 0)
			say("event: tag %llu %s", (unsigned long long)ev[0].data.u64,
			    pmask((int)ev[0].events));
		res("recv", recv_all(fd, buf, 4));

		/* a blocking recv is restarted (SA_RESTART) */
		fcmd(F_SEND_AFTER_HIT, 6);
		signals_start_hit();
		res("blocking recv, signals during the wait", recv(fd, buf, sizeof(buf), 0));
		signals_stop();
		say("handler ran: %s", yesno(atomic_load(&sig_count) > 0));

		/* without SA_RESTART: EINTR (SO_RCVTIMEO bounds the wait, in
		 * case the signal does not end it) */
		set_handler(0);
		struct timeval rt = { 3, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
		signals_start();
		res("blocking recv (SO_RCVTIMEO 3 s), no SA_RESTART", recv(fd, buf, sizeof(buf), 0));
		res("epoll_wait(5000), no SA_RESTART", epoll_wait(ep, ev, 4, 5000));
		signals_stop();
		signal(SIGUSR1, SIG_IGN);
	}
	res("close", close(fd));

	say("--- the peer process is killed");
	tell_u64(F_GC_CONNECT);
	tell_u64(0);
	fd = server_conn(lfd);
	await_peer();
	ctl("ADD IN|RDHUP", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, 15);
	fcmd(F_GC_KILL, 0);
	wait_ev(fd, POLLRDHUP);                 /* its end has arrived */
	wait_report(ep, "peer killed", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));

	say("--- the peer process is killed with data it did not read");
	tell_u64(F_GC_CONNECT);
	tell_u64(0);
	fd = server_conn(lfd);
	await_peer();
	res("send 100", send_all(fd, buf, 100));
	ctl("ADD IN|RDHUP", ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLRDHUP, 16);
	msleep(100);
	wait_report(ep, "before", 100);
	fcmd(F_GC_KILL, 0);
	wait_ev(fd, POLLERR);                   /* its reset has arrived */
	wait_report(ep, "peer killed", 1000);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	wait_report(ep, "after recv", 100);
	res("recv", recv(fd, buf, sizeof(buf), 0));
	res("close", close(fd));

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
	say("--- epoll_pwait2");
	fd = new_conn(lfd);
	ctl("ADD IN", ep, EPOLL_CTL_ADD, fd, EPOLLIN, 13);
	{
		struct epoll_event ev[4];
		struct timespec t100 = { 0, 100000000 }, t0 = { 0, 0 }, t2 = { 2, 0 };
		res("epoll_pwait2 idle, 100 ms", epoll_pwait2(ep, ev, 4, &t100, NULL));
		res("epoll_pwait2 idle, 0", epoll_pwait2(ep, ev, 4, &t0, NULL));
		fcmd(F_SEND_LATER, 5);
		int n = epoll_pwait2(ep, ev, 4, &t2, NULL);
		res("epoll_pwait2, peer sends during the wait", n);
		if (n > 0)
			say("event: tag %llu %s", (unsigned long long)ev[0].data.u64,
			    pmask((int)ev[0].events));
		struct timespec t5 = { 5, 0 };
		n = epoll_pwait2(ep, ev, 4, &t5, NULL);
		res("epoll_pwait2, 5 s, data pending", n);
		if (n > 0)
			say("event: tag %llu %s", (unsigned long long)ev[0].data.u64,
			    pmask((int)ev[0].events));
		res("recv", recv_all(fd, buf, 5));
		res("epoll_pwait2 drained, 0", epoll_pwait2(ep, ev, 4, &t0, NULL));
	}
	res("close", close(fd));
#else
	say("--- epoll_pwait2: not in this C library");
#endif

	tell_u64(F_END);
	tell_u64(0);
	res("close epoll fd", close(ep));
}

static void client(void)
{
	int fds[8], nfd = 0;
	pid_t gc = -1;
	static char buf[65536];
	uint64_t seq = 0;

	for (;;) {
		uint64_t c = await_u64(), arg = await_u64();
		if (c == F_END)
			break;
		switch (c) {
		case F_CONNECT:
			if (nfd == 8)
				fatal("too many connections");
			fds[nfd++] = client_conn();
			break;
		case F_CONNECT_SMALL: {
			if (nfd == 8)
				fatal("too many connections");
			struct sockaddr_in a = t_addr();
			int fd = socket(AF_INET, SOCK_STREAM, 0), v = SMALL_BUF;
			if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0)
				fatal("socket/SO_RCVBUF");
			if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
				fatal("connect");
			hs_client(fd);
			fds[nfd++] = fd;
			break;
		}
		case F_SEND:
			pattern(buf, arg, seq, 5);
			seq += arg;
			if (send_all(fds[nfd - 1], buf, arg) != (ssize_t)arg)
				fatal("send");
			break;
		case F_SHUTWR:
			res("shutdown(SHUT_WR)", shutdown(fds[nfd - 1], SHUT_WR));
			break;
		case F_CLOSE:
			res("close", close(fds[nfd - 1]));
			fds[--nfd] = -1;
			break;
		case F_ABORT: {
			int fd = fds[--nfd];
			struct linger lg = { 1, 0 };
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			res("abortive close", close(fd));
			break;
		}
		case F_DRAIN: {
			uint64_t want = await_u64();
			size_t got;
			uint64_t h = recv_count(fds[nfd - 1], arg, &got);
			say("drained what the server sent, equal: %s", yesno(got == arg && h == want));
			break;
		}
		case F_SEND_LATER:              /* once the server sleeps in its call */
		case F_SEND_AFTER_HIT:          /* once a signal hit its call */
			tell();
			if (c == F_SEND_LATER)
				await_peer_asleep();
			else
				await_peer();
			pattern(buf, arg, seq, 5);
			seq += arg;
			if (send_all(fds[nfd - 1], buf, arg) != (ssize_t)arg)
				fatal("send");
			continue;               /* told already */
		case F_GC_CONNECT:
			gc = connected_kid("grandchild did not connect");
			break;
		case F_GC_KILL:
			kill(gc, SIGKILL);
			waitpid(gc, NULL, 0);
			gc = -1;
			break;
		}
		tell();
	}
	while (nfd)
		close(fds[--nfd]);
}

int main(void)
{
	return run(server, client);
}
