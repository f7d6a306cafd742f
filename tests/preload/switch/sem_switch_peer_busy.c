/* SPDX-License-Identifier: MIT */
/* The peer of a connection switched back to TCP is asleep in send() with
 * its buffers full: the server sends (MSG_DONTWAIT) until EAGAIN, the client
 * reading none of it, then a thread of the server sends a further chunk
 * with a blocking send() (at least 400000 bytes unread in all), and once
 * that thread is asleep the client exec()s python3 without the library with
 * the fd.  Python reads everything the server sent, exact and in order, and
 * the blocked send() completes with all its bytes; python then sends a
 * reply and shuts down writing, which the server reads up to EOF (design
 * brief, layer 5: the peer notices nothing).  Both buffers are fixed
 * (SO_SNDBUF on the server's socket, SO_RCVBUF on the client's before it
 * connects): with the kernel's autotuning the receive window may grow while
 * the client reads nothing (tcp_rmem max 32 MiB), and the blocked send()
 * would not stay blocked. */
// expect: switched 2
#include "common.h"
#include <pthread.h>
#include <stdatomic.h>

/* server -> client: seed 41; client -> server: seed 42 */
#define AT_LEAST 400000         /* unread when the client execs */
#define CHUNK_MIN 100000        /* the blocked send() */
#define REPLY 3000

static int t_fd;
static size_t t_off, t_len;             /* the blocked send's bytes */
static _Atomic pid_t t_tid;
static _Atomic int t_in_send, t_done;
static long t_rc;
static int t_errno;

static void *send_thread(void *arg)
{
	(void)arg;
	char *buf = malloc(t_len);
	if (!buf)
		fatal("malloc");
	pattern(buf, t_len, t_off, 41);
	t_tid = gettid();
	t_in_send = 1;
	ssize_t r = send(t_fd, buf, t_len, MSG_NOSIGNAL);
	t_errno = errno;
	t_rc = r;
	t_done = 1;
	free(buf);
	return NULL;
}

static void server(int lfd)
{
	static char buf[65536];
	int fd = server_conn(lfd);
	size_t sent = 0;
	int bufsz = 65536;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof(bufsz)) < 0)
		fatal("SO_SNDBUF");

	/* fill the buffers: MSG_DONTWAIT until EAGAIN and poll() finds no room
	 * (how much fits is the transport's business, so it is not printed) */
	for (;;) {
		pattern(buf, sizeof(buf), sent, 41);
		ssize_t w = send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			/* no room, and none coming within 300 ms */
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, 300) == 0)
				break;
			continue;
		}
		fatal("send");
	}
	say("sent with MSG_DONTWAIT until EAGAIN and no room for 300 ms");
	t_fd = fd;
	t_off = sent;
	t_len = sent + CHUNK_MIN >= AT_LEAST ? CHUNK_MIN : AT_LEAST - sent;
	pthread_t th;
	if (pthread_create(&th, NULL, send_thread, NULL))
		fatal("pthread_create");
	int i;
	for (i = 0; i < 1000; i++) {
		if (t_in_send && t_tid && t_state(getpid(), t_tid) == 'S')
			break;
		msleep(10);
	}
	if (i == 1000)
		fatal("the thread is not asleep in send()");
	msleep(100);
	say("a thread is asleep in a blocking send() that has not returned: %s",
	    yesno(!t_done && t_state(getpid(), t_tid) == 'S'));
	say("unread by the client: at least %d: %s", AT_LEAST, yesno(sent + t_len >= AT_LEAST));
	tell_u64(sent + t_len);                 /* exec now; python reads this many */

	pthread_join(th, NULL);
	if (t_rc < 0)
		say("the blocked send() = -1 %s", ename(t_errno));
	else
		say("the blocked send() returned all its bytes: %s", yesno((size_t)t_rc == t_len));
	size_t got;
	uint64_t h = recv_count(fd, REPLY + 1, &got);
	say("received %zu bytes up to EOF, exact: %s", got,
	    yesno(got == REPLY && h == pattern_ck(REPLY, 42)));
	res("close", close(fd));
}

/* python: argv fd total n: reads total bytes of the server's stream (seed
 * 41), sends n bytes (seed 42), shuts down writing, waits for EOF */
static const char py[] =
	"import socket, sys\n"
	"B = [bytes(((i * 131) + c) & 255 for i in range(512)) for c in range(256)]\n"
	"def pat(off, n, seed):\n"
	"    if n <= 0: return b''\n"
	"    k0, k1 = off >> 9, (off + n - 1) >> 9\n"
	"    s = b''.join(B[(seed + k + (k >> 8)) & 255] for k in range(k0, k1 + 1))\n"
	"    o = off - (k0 << 9)\n"
	"    return s[o:o + n]\n"
	"fd, total, n = map(int, sys.argv[1:4])\n"
	"s = socket.socket(fileno=fd)\n"
	"s.settimeout(10)\n"
	"got = bytearray()\n"
	"try:\n"
	"    while len(got) < total:\n"
	"        b = s.recv(min(total - len(got), 1 << 20))\n"
	"        if not b: break\n"
	"        got += b\n"
	"except OSError as e:\n"
	"    print('client: python: recv error: %s' % type(e).__name__)\n"
	"print('client: python: read all the server sent: %s, exact: %s'\n"
	"      % ('yes' if len(got) == total else 'no (%d of %d)' % (len(got), total),\n"
	"         'yes' if bytes(got) == pat(0, total, 41) else 'no'))\n"
	"s.sendall(pat(0, n, 42))\n"
	"s.shutdown(socket.SHUT_WR)\n"
	"try:\n"
	"    print('client: python: recv at EOF = %d' % len(s.recv(100)))\n"
	"except OSError as e:\n"
	"    print('client: python: recv at EOF: %s' % type(e).__name__)\n"
	"s.close()\n";

static void client(void)
{
	struct sockaddr_in a = t_addr();
	int fd = socket(AF_INET, SOCK_STREAM, 0), bufsz = 65536;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof(bufsz)) < 0)
		fatal("socket/SO_RCVBUF");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fatal("connect");
	hs_client(fd);
	uint64_t total = await_u64();           /* the server's thread sleeps in send() */
	char a_fd[16], a_total[24], a_n[16];
	snprintf(a_fd, sizeof(a_fd), "%d", fd);
	snprintf(a_total, sizeof(a_total), "%llu", (unsigned long long)total);
	snprintf(a_n, sizeof(a_n), "%d", REPLY);
	say("exec python3 with the fd, nothing read, without the library");
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	unsetenv("LD_PRELOAD");
	char *argv[] = { "python3", "-c", (char *)py, a_fd, a_total, a_n, NULL };
	execv("/usr/bin/python3", argv);
	fatal("exec python3");
}

int main(void)
{
	return run(server, client);
}
