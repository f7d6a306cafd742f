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
#include "common.h"
#include <pthread.h>
#include <stdatomic.h>

/* client -> server streams (and so their echoes): seed 33 on connection 1,
 * seed 34 on connection 2 */
static const size_t msgs[] = { 100, 3000, 20000, 40000 };
#define INFLIGHT1 7000          /* sent on 1 before the exec; 1000 of its echo read */
#define INFLIGHT1_READ 1000
#define INFLIGHT2 5000          /* sent on 2 before the exec; none of its echo read */
#define PRE2 (100 + 3000 + 20000 + 40000 + INFLIGHT2)

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

/* thread tid of this process asleep (state S) */
static bool asleep(pid_t tid)
{
	char path[64], st[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return false;
	ssize_t n = read(f, st, sizeof(st) - 1);
	close(f);
	if (n <= 0)
		return false;
	st[n] = 0;
	char *p = strrchr(st, ')');
	return p && p[1] == ' ' && p[2] == 'S';
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
		if (t_echoed == PRE2 && t_in_recv && t_tid && asleep(t_tid))
			break;
		msleep(10);
	}
	if (i == 1000)
		fatal("the thread is not asleep in recv()");
	msleep(100);
	say("thread asleep in recv() on connection 2, all %d bytes echoed: %s", PRE2,
	    yesno(t_echoed == PRE2 && t_in_recv && asleep(t_tid)));
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

/* python: argv [name fd sent echoed seed]...: reads the echoes of
 * [echoed, sent) on each connection, then rounds of one message per
 * connection (sizes from an LCG) until 200000 bytes are sent, each echo
 * checked; closes both */
static const char py[] =
	"import socket, sys\n"
	"B = [bytes(((i * 131) + c) & 255 for i in range(512)) for c in range(256)]\n"
	"def pat(off, n, seed):\n"
	"    if n <= 0: return b''\n"
	"    k0, k1 = off >> 9, (off + n - 1) >> 9\n"
	"    s = b''.join(B[(seed + k + (k >> 8)) & 255] for k in range(k0, k1 + 1))\n"
	"    o = off - (k0 << 9)\n"
	"    return s[o:o + n]\n"
	"def recvn(s, n):\n"
	"    got = bytearray()\n"
	"    while len(got) < n:\n"
	"        b = s.recv(min(n - len(got), 1 << 20))\n"
	"        if not b: break\n"
	"        got += b\n"
	"    return bytes(got)\n"
	"a = sys.argv[1:]\n"
	"conns = []\n"
	"for i in range(0, len(a), 5):\n"
	"    s = socket.socket(fileno=int(a[i + 1]))\n"
	"    s.settimeout(10)\n"
	"    conns.append([a[i], s, int(a[i + 2]), int(a[i + 3]), int(a[i + 4])])\n"
	"for c in conns:\n"
	"    got = recvn(c[1], c[2] - c[3])\n"
	"    print('client: python: connection %s: the pending echo, %d bytes, exact: %s'\n"
	"          % (c[0], len(got), 'yes' if got == pat(c[3], c[2] - c[3], c[4]) else 'no'))\n"
	"    c[3] += len(got)\n"
	"x, total, rounds, ok = 777, 0, 0, True\n"
	"while total < 200000:\n"
	"    sizes = []\n"
	"    for c in conns:\n"
	"        x = (x * 1103515245 + 12345) & 0x7fffffff\n"
	"        n = 1 + x % 30000\n"
	"        c[1].sendall(pat(c[2], n, c[4]))\n"
	"        c[2] += n\n"
	"        total += n\n"
	"        sizes.append(n)\n"
	"    for c, n in zip(conns, sizes):\n"
	"        got = recvn(c[1], n)\n"
	"        ok = ok and got == pat(c[3], n, c[4])\n"
	"        c[3] += len(got)\n"
	"    rounds += 1\n"
	"print('client: python: %d rounds, %d bytes sent, every echo exact: %s'\n"
	"      % (rounds, total, 'yes' if ok else 'no'))\n"
	"for c in conns:\n"
	"    print('client: python: connection %s: %d bytes sent in all, %d echoed' % (c[0], c[2], c[3]))\n"
	"    c[1].close()\n";

static void client(void)
{
	int fd[2] = { client_conn(), client_conn() };
	size_t off[2] = { 0, 0 };
	for (size_t m = 0; m < sizeof(msgs) / sizeof(msgs[0]); m++)
		for (int i = 0; i < 2; i++) {
			send_at(fd[i], off[i], msgs[m], 33 + (unsigned)i);
			say("connection %d: sent %zu, echo exact: %s", i + 1, msgs[m],
			    yesno(recv_exact_at(fd[i], off[i], msgs[m], 33 + (unsigned)i)));
			off[i] += msgs[m];
		}
	/* echoes left in flight */
	send_at(fd[0], off[0], INFLIGHT1, 33);
	say("connection 1: sent %d, first %d of the echo exact: %s", INFLIGHT1, INFLIGHT1_READ,
	    yesno(recv_exact_at(fd[0], off[0], INFLIGHT1_READ, 33)));
	size_t echoed0 = off[0] + INFLIGHT1_READ;
	off[0] += INFLIGHT1;
	send_at(fd[1], off[1], INFLIGHT2, 34);
	say("connection 2: sent %d, its echo not read", INFLIGHT2);
	size_t echoed1 = off[1];
	off[1] += INFLIGHT2;
	tell();                                 /* ready */
	await_peer();                           /* the server's thread sleeps in recv() */

	char args[10][24];
	snprintf(args[0], 24, "1");
	snprintf(args[1], 24, "%d", fd[0]);
	snprintf(args[2], 24, "%zu", off[0]);
	snprintf(args[3], 24, "%zu", echoed0);
	snprintf(args[4], 24, "33");
	snprintf(args[5], 24, "2");
	snprintf(args[6], 24, "%d", fd[1]);
	snprintf(args[7], 24, "%zu", off[1]);
	snprintf(args[8], 24, "%zu", echoed1);
	snprintf(args[9], 24, "34");
	say("exec python3 with both fds, without the library");
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	unsetenv("LD_PRELOAD");
	char *argv[] = { "python3", "-c", (char *)py, args[0], args[1], args[2], args[3],
			 args[4], args[5], args[6], args[7], args[8], args[9], NULL };
	execv("/usr/bin/python3", argv);
	fatal("exec python3");
}

int main(void)
{
	return run(server, client);
}
