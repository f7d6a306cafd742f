/* SPDX-License-Identifier: MIT */
/* The peer of a connection switched back to TCP waits in poll() on one
 * connection and, in another thread, blocked in recv() on a second one.  The
 * server echoes everything: connection 1 from a poll() loop (nonblocking,
 * read until EAGAIN, write until EAGAIN, the rest kept and written when
 * poll() reports POLLOUT), connection 2 from a thread doing blocking recv()
 * and send().  The client exchanges a few messages on each, leaves echoes
 * in flight on both and, once the server's thread is asleep in recv() on
 * connection 2 (nothing left to read there), exec()s python3 without the
 * library with both fds.  Python reads the pending echoes, sends about
 * 200 KB more in messages of pseudo-random sizes on both connections and
 * checks every echoed byte, then closes both.  The recv() that was asleep
 * across the exec must return python's bytes, the poll() loop must go on,
 * every byte must be echoed, then EOF on both (design brief, layer 5: the
 * peer notices nothing).  Two connections, so four halves switch back to
 * TCP. */
// expect: switched 4
#include "exec_common.h"
#include <pthread.h>
#include <stdatomic.h>

/* the client: echo_exec_client (exec_common.h); client -> server streams
 * (and so their echoes): seed 33 on connection 1, seed 34 on connection 2 */
#define INFLIGHT2 5000          /* sent on 2 before the exec; none of its echo read */
#define PRE2 (ECHO_EXEC_SENT + INFLIGHT2)

/* ---- the server's thread: blocking echo on connection 2 ------------------ */

static int t_fd2;
static _Atomic pid_t t_tid;
static _Atomic uint64_t t_echoed;       /* bytes read and echoed */
static _Atomic int t_in_recv;           /* set just before each recv() */
static bool t_exact = true;
static long t_blocked_rc = -2;          /* the recv() asleep at the exec */
static int t_blocked_errno, t_end_errno;
static long t_end_rc;

static void *echo_thread(void *arg)
{
	static char buf[65536], want[65536];
	(void)arg;
	t_tid = gettid();
	for (;;) {
		uint64_t at = t_echoed;
		t_in_recv = 1;
		ssize_t r = recv(t_fd2, buf, sizeof(buf), 0);
		t_in_recv = 0;
		if (at == PRE2 && t_blocked_rc == -2) {
			t_blocked_rc = r;
			t_blocked_errno = errno;
		}
		if (r <= 0) {
			t_end_rc = r;
			t_end_errno = errno;
			break;
		}
		pattern(want, (size_t)r, at, 34);
		if (memcmp(buf, want, (size_t)r))
			t_exact = false;
		if (send_all(t_fd2, buf, (size_t)r) != r) {
			t_end_rc = -3;
			t_end_errno = errno;
			break;
		}
		t_echoed = at + (uint64_t)r;
	}
	return NULL;
}

/* ---- the server's poll() loop on connection 1 ----------------------------- */

static char *e_buf;             /* read, not echoed yet: [e_off, e_len) */
static size_t e_off, e_len, e_cap;
static uint64_t e_in, e_out;

/* read until EAGAIN or EOF; returns 1 at EOF, 0 at EAGAIN */
static int e_read(int fd)
{
	for (;;) {
		if (e_cap - e_len < 65536) {
			if (e_off) {
				memmove(e_buf, e_buf + e_off, e_len - e_off);
				e_len -= e_off;
				e_off = 0;
			}
			if (e_cap - e_len < 65536) {
				e_cap = e_cap ? e_cap * 2 : 262144;
				if (!(e_buf = realloc(e_buf, e_cap)))
					fatal("realloc");
			}
		}
		ssize_t r = recv(fd, e_buf + e_len, e_cap - e_len, 0);
		if (r > 0) {
			e_len += (size_t)r;
			e_in += (uint64_t)r;
		} else if (r == 0) {
			return 1;
		} else if (errno == EAGAIN) {
			return 0;
		} else if (errno != EINTR) {
			fatal("connection 1: recv");
		}
	}
}

static void e_flush(int fd)
{
	while (e_off < e_len) {
		ssize_t w = send(fd, e_buf + e_off, e_len - e_off, MSG_NOSIGNAL);
		if (w > 0) {
			e_off += (size_t)w;
			e_out += (uint64_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			return;
		} else if (!(w < 0 && errno == EINTR)) {
			fatal("connection 1: send");
		}
	}
	e_off = e_len = 0;
}

/* echo on fd until EOF, or (sync >= 0) until sync is readable; returns true
 * at EOF */
static bool poll_loop(int fd, int sync)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = POLLIN | POLLRDHUP | (e_off < e_len ? POLLOUT : 0) },
			{ .fd = sync, .events = POLLIN },
		};
		int n = poll(p, sync >= 0 ? 2 : 1, 10000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fatal("poll = %d", n);
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			fatal("connection 1: revents %s", pmask(p[0].revents));
		bool eof = false;
		if (p[0].revents & (POLLIN | POLLRDHUP))
			eof = e_read(fd);
		if (p[0].revents)
			e_flush(fd);
		if (eof)
			return true;
		if (sync >= 0 && p[1].revents)
			return false;
	}
}

static void server(int lfd)
{
	int fd1 = server_conn(lfd);
	t_fd2 = server_conn(lfd);
	say("accepted 2 connections");
	int fl = fcntl(fd1, F_GETFL);
	if (fl < 0 || fcntl(fd1, F_SETFL, fl | O_NONBLOCK) < 0)
		fatal("O_NONBLOCK");
	pthread_t th;
	if (pthread_create(&th, NULL, echo_thread, NULL))
		fatal("pthread_create");

	if (poll_loop(fd1, t_c2p[0]))
		fatal("connection 1: EOF before the exec");
	await_peer();                           /* the client is ready to exec */
	/* the thread has echoed all the client sent on 2 and sleeps in recv() */
	int i;
	for (i = 0; i < 1000; i++) {
		if (t_echoed == PRE2 && t_in_recv && t_tid && t_state(getpid(), t_tid) == 'S')
			break;
		msleep(10);
	}
	if (i == 1000)
		fatal("the thread is not asleep in recv()");
	msleep(100);
	say("thread asleep in recv() on connection 2, all %d bytes echoed: %s", PRE2,
	    yesno(t_echoed == PRE2 && t_in_recv && t_state(getpid(), t_tid) == 'S'));
	tell();                                 /* exec now */

	if (!poll_loop(fd1, -1))
		fatal("poll_loop");
	say("connection 1 (poll): read %llu bytes, echoed %llu, then recv() = 0 after "
	    "poll(), nothing left to echo: %s", (unsigned long long)e_in,
	    (unsigned long long)e_out, yesno(e_off == e_len));
	poll1("connection 1 at EOF", fd1, POLLIN | POLLRDHUP, 1000);

	pthread_join(th, NULL);
	if (t_blocked_rc < 0)
		say("thread: the recv() asleep at the exec = -1 %s", ename(t_blocked_errno));
	else
		say("thread: the recv() asleep at the exec returned python's bytes: %s",
		    yesno(t_blocked_rc > 0));
	errno = t_end_errno;
	res("thread: last recv()", t_end_rc);
	say("thread: connection 2 (blocking recv): read and echoed %llu bytes, in order: %s",
	    (unsigned long long)t_echoed, yesno(t_exact));
	poll1("connection 2 at EOF", t_fd2, POLLIN | POLLRDHUP, 1000);
	res("close connection 1", close(fd1));
	res("close connection 2", close(t_fd2));
	free(e_buf);
}

/* ---- the client ---------------------------------------------------------- */

/* after the in-flight bytes on connection 2: the exec waits for the
 * server's thread asleep in recv() on it */
static void sent2(int fd2)
{
	(void)fd2;
	say("connection 2: sent %d, its echo not read", INFLIGHT2);
	tell();                                 /* ready */
	await_peer();                           /* the server's thread sleeps in recv() */
}

static void client(void)
{
	echo_exec_client(33, 777, INFLIGHT2, sent2);
}

int main(void)
{
	return run(server, client);
}
