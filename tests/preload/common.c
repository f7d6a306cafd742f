/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the preload oracle tests, #included by each
 * tests/preload/sem_*.c (libc only; never linked with libshortcut).
 *
 * A scenario is a server(lfd) and a client() function.  run() makes a
 * listener on 127.0.0.1:0, forks (the child is the client), bounds both
 * processes with alarm(20) and prints a transcript: the server's lines
 * first, then the client's (each process writes its own, so the output is
 * deterministic whatever the interleaving).  Both halves are sequenced with
 * two pipes (tell/await).  The same binary runs on kernel TCP and under
 * `shortcut run`; tests/preload/run.sh compares the two transcripts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))   /* not every scenario uses every helper */

static bool t_child;
static void dump_child(void);
static FILE *t_out;
static int t_p2c[2], t_c2p[2];  /* parent -> child, child -> parent */
static uint16_t t_port;         /* host order */
static pid_t t_pid;             /* the child, in the parent */

static UNUSED const char *ename(int e)
{
	static char buf[32];
	switch (e) {
#define E(x) case x: return #x;
	E(EAGAIN) E(EINPROGRESS) E(EALREADY) E(EISCONN) E(ENOTCONN) E(ECONNRESET)
	E(ECONNREFUSED) E(ECONNABORTED) E(EPIPE) E(EBADF) E(EINVAL) E(EINTR)
	E(EFAULT) E(ENOTSOCK) E(EOPNOTSUPP) E(ENOPROTOOPT) E(EMSGSIZE) E(ENOBUFS)
	E(ENOMEM) E(ETIMEDOUT) E(ENOENT) E(EEXIST) E(EPERM) E(ESHUTDOWN) E(ENOSYS)
	E(ESPIPE) E(EDESTADDRREQ) E(EAFNOSUPPORT) E(EADDRINUSE) E(ENOTTY) E(EIO) E(ELOOP)
#undef E
	}
	snprintf(buf, sizeof(buf), "errno%d", e);
	return buf;
}

static UNUSED void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static UNUSED void say(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	fputs(t_child ? "client: " : "server: ", t_out);
	va_start(ap, fmt);
	vfprintf(t_out, fmt, ap);
	va_end(ap);
	fputc('\n', t_out);
	errno = saved;
}

static UNUSED void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static UNUSED void fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	fprintf(stderr, "%s FATAL: ", t_child ? "client" : "server");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno %s)\n", ename(saved));
	if (t_out)
		fflush(t_out);
	if (t_child)
		_exit(1);
	if (t_pid > 0) {
		kill(t_pid, SIGKILL);
		waitpid(t_pid, NULL, 0);
		fflush(stdout);
		dump_child();           /* the client's transcript as far as it got */
	}
	exit(1);
}

/* "what = n" or "what = -1 ENAME" */
static UNUSED void res(const char *what, long r)
{
	if (r < 0)
		say("%s = -1 %s", what, ename(errno));
	else
		say("%s = %ld", what, r);
}

static UNUSED const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

static UNUSED const char *pmask(int r)
{
	static char bufs[4][160];     /* several may appear in one say() */
	static int next;
	char *buf = bufs[next++ % 4];
	static const struct { int bit; const char *name; } names[] = {
		{ POLLIN, "IN" }, { POLLPRI, "PRI" }, { POLLOUT, "OUT" }, { POLLERR, "ERR" },
		{ POLLHUP, "HUP" }, { POLLNVAL, "NVAL" }, { POLLRDHUP, "RDHUP" },
		{ POLLRDNORM, "RDNORM" }, { POLLRDBAND, "RDBAND" }, { POLLWRNORM, "WRNORM" },
		{ POLLWRBAND, "WRBAND" },
	};
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (r & names[i].bit) {
			if (buf[0])
				strcat(buf, "|");
			strcat(buf, names[i].name);
			r &= ~names[i].bit;
		}
	if (r)
		snprintf(buf + strlen(buf), sizeof(bufs[0]) - strlen(buf), "%s0x%x", buf[0] ? "|" : "", r);
	if (!buf[0])
		strcpy(buf, "0");
	return buf;
}

/* poll one fd; prints "label: rc=N revents=MASK" */
static UNUSED int poll1(const char *label, int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int rc = poll(&p, 1, timeout_ms);
	if (rc < 0)
		say("%s: poll = -1 %s", label, ename(errno));
	else
		say("%s: poll = %d revents=%s", label, rc, pmask(p.revents));
	return rc < 0 ? -1 : p.revents;
}

static UNUSED void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* ---- sequencing between the two processes ------------------------------- */

static UNUSED void put_bytes(const void *p, size_t n)
{
	int fd = t_child ? t_c2p[1] : t_p2c[1];
	const char *b = p;
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fatal("sync pipe write");
		b += w;
		n -= (size_t)w;
	}
}

static UNUSED void get_bytes(void *p, size_t n)
{
	int fd = t_child ? t_p2c[0] : t_c2p[0];
	char *b = p;
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fatal("sync pipe read: peer gone");
		b += r;
		n -= (size_t)r;
	}
}

static UNUSED void tell(void)
{
	put_bytes("x", 1);
}

static UNUSED void await_peer(void)
{
	char c;
	get_bytes(&c, 1);
}

static UNUSED void tell_u64(uint64_t v)
{
	put_bytes(&v, sizeof(v));
}

static UNUSED uint64_t await_u64(void)
{
	uint64_t v;
	get_bytes(&v, sizeof(v));
	return v;
}

/* ---- data ---------------------------------------------------------------- */

static UNUSED void pattern(void *buf, size_t n, uint64_t off, unsigned seed)
{
	unsigned char *b = buf;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = off + i;
		b[i] = (unsigned char)(x * 131u + seed + (x >> 9) + (x >> 17));
	}
}

#define CK_INIT 0xcbf29ce484222325ull
static UNUSED uint64_t ck(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* send all of buf, waiting (poll) when the socket is nonblocking */
static UNUSED ssize_t send_all(int fd, const void *buf, size_t n)
{
	const char *b = buf;
	size_t done = 0;
	while (done < n) {
		ssize_t w = send(fd, b + done, n - done, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			poll(&p, 1, 5000);
			continue;
		}
		if (w < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)w;
	}
	return (ssize_t)done;
}

/* receive n bytes (fewer at EOF), waiting (poll) when nonblocking */
static UNUSED ssize_t recv_all(int fd, void *buf, size_t n)
{
	char *b = buf;
	size_t done = 0;
	while (done < n) {
		ssize_t r = recv(fd, b + done, n - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			poll(&p, 1, 5000);
			continue;
		}
		if (r < 0)
			return done ? (ssize_t)done : -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

/* send n pattern bytes; returns their checksum */
static UNUSED uint64_t send_pattern(int fd, size_t n, unsigned seed)
{
	static char buf[65536];
	uint64_t h = CK_INIT;
	for (size_t off = 0; off < n;) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		pattern(buf, k, off, seed);
		h = ck(h, buf, k);
		if (send_all(fd, buf, k) != (ssize_t)k)
			fatal("send_pattern");
		off += k;
	}
	return h;
}

/* receive n bytes (fewer at EOF); *got = how many; returns the checksum */
static UNUSED uint64_t recv_count(int fd, size_t n, size_t *got)
{
	static char buf[65536];
	uint64_t h = CK_INIT;
	size_t off = 0;
	while (off < n) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		ssize_t r = recv_all(fd, buf, k);
		if (r < 0)
			fatal("recv_count");
		h = ck(h, buf, (size_t)r);
		off += (size_t)r;
		if ((size_t)r < k)
			break;
	}
	*got = off;
	return h;
}

static UNUSED uint64_t pattern_ck(size_t n, unsigned seed)
{
	static char buf[65536];
	uint64_t h = CK_INIT;
	for (size_t off = 0; off < n;) {
		size_t k = n - off < sizeof(buf) ? n - off : sizeof(buf);
		pattern(buf, k, off, seed);
		h = ck(h, buf, k);
		off += k;
	}
	return h;
}

/* ---- connections ----------------------------------------------------------- */

static UNUSED struct sockaddr_in t_addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(t_port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static UNUSED int make_listener(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		fatal("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		fatal("bind/listen");
	t_port = ntohs(a.sin_port);
	return fd;
}

/* client: a connected socket (no data exchanged yet) */
static UNUSED int raw_connect(void)
{
	struct sockaddr_in a = t_addr();
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		fatal("socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fatal("connect");
	return fd;
}

/* One byte each way, so that both ends are fully set up before a scenario
 * starts (the client's first send and the server's reply). */
static UNUSED void hs_client(int fd)
{
	char c = 'h';
	if (send_all(fd, &c, 1) != 1 || recv_all(fd, &c, 1) != 1 || c != 'H')
		fatal("handshake (client)");
}

static UNUSED void hs_server(int fd)
{
	char c = 0;
	if (recv_all(fd, &c, 1) != 1 || c != 'h')
		fatal("handshake (server)");
	c = 'H';
	if (send_all(fd, &c, 1) != 1)
		fatal("handshake (server)");
}

static UNUSED int client_conn(void)
{
	int fd = raw_connect();
	hs_client(fd);
	return fd;
}

static UNUSED int server_conn(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	hs_server(fd);
	return fd;
}

/* ---- the driver ------------------------------------------------------------- */

static int t_ct_fd = -1;        /* the client's transcript, in the parent */

static void dump_child(void)
{
	char buf[4096];
	ssize_t n;
	off_t off = 0;
	while ((n = pread(t_ct_fd, buf, sizeof(buf), off)) > 0) {
		if (write(1, buf, (size_t)n) != n)
			break;
		off += n;
	}
}

/* the parent timed out: show both transcripts as far as they got */
static void on_alarm(int sig)
{
	static const char msg[] = "server: TIMEOUT\n";
	(void)sig;
	if (t_pid > 0)
		kill(t_pid, SIGKILL);
	if (write(1, msg, sizeof(msg) - 1) < 0) {
	}
	if (t_ct_fd >= 0)
		dump_child();
	_exit(1);
}

static UNUSED int run(void (*server)(int lfd), void (*client)(void))
{
	int lfd, st;
	FILE *ct;

	alarm(20);
	t_out = stdout;
	setvbuf(stdout, NULL, _IOLBF, 0);      /* a timed-out run still shows how far it got */
	lfd = make_listener();
	if (pipe(t_p2c) < 0 || pipe(t_c2p) < 0 || !(ct = tmpfile()))
		fatal("pipe/tmpfile");
	fflush(stdout);
	fflush(stderr);
	t_pid = fork();
	if (t_pid < 0)
		fatal("fork");
	if (t_pid == 0) {
		alarm(20);
		t_child = true;
		t_out = ct;
		setvbuf(ct, NULL, _IOLBF, 0);
		close(lfd);
		close(t_p2c[1]);
		close(t_c2p[0]);
		client();
		fflush(t_out);
		_exit(0);
	}
	close(t_p2c[0]);
	close(t_c2p[1]);
	t_ct_fd = fileno(ct);
	signal(SIGALRM, on_alarm);
	server(lfd);
	close(lfd);
	fflush(stdout);
	while (waitpid(t_pid, &st, 0) < 0)
		if (errno != EINTR)
			fatal("waitpid");
	dump_child();
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "client did not run to the end (status 0x%x)\n", (unsigned)st);
		return 1;
	}
	return 0;
}
