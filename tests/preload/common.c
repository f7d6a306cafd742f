/* SPDX-License-Identifier: MIT */
/*
 * The helpers of the preload oracle programs (common.h says what each
 * does), compiled once into the archive tests/preload/run.sh links every
 * tests/preload/<family>/sem_*.c with.
 */
#include "common.h"

bool t_child;
FILE *t_out;
int t_p2c[2], t_c2p[2];
uint16_t t_port;
pid_t t_pid;
pid_t t_srv;

static void dump_child(void);

const char *ename(int e)
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

void say(const char *fmt, ...)
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

void fatal(const char *fmt, ...)
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
void res(const char *what, long r)
{
	if (r < 0)
		say("%s = -1 %s", what, ename(errno));
	else
		say("%s = %ld", what, r);
}

const char *yesno(bool b)
{
	return b ? "yes" : "no";
}

const char *pmask(int r)
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
int poll1(const char *label, int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int rc = poll(&p, 1, timeout_ms);
	if (rc < 0)
		say("%s: poll = -1 %s", label, ename(errno));
	else
		say("%s: poll = %d revents=%s", label, rc, pmask(p.revents));
	return rc < 0 ? -1 : p.revents;
}

void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* flush stdout and the transcript (or the child would print their buffered
 * lines again), then fork; fails loudly if it cannot */
pid_t t_fork(void)
{
	fflush(stdout);
	if (t_out)
		fflush(t_out);
	pid_t pid = fork();
	if (pid < 0)
		fatal("fork");
	return pid;
}

volatile sig_atomic_t t_caught;

static void count_usr1(int sig)
{
	(void)sig;
	t_caught++;
}

/* SIGUSR1 counted in t_caught; flags: 0 or SA_RESTART */
void t_on_usr1(int flags)
{
	struct sigaction sa = { .sa_handler = count_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

/* ---- waiting for events, not for time ----------------------------------- */

long t_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* the state letter of thread tid of process pid (/proc/PID/task/TID/stat:
 * 'R' running or runnable, 'S' asleep in a call, 'T' stopped, ...); '?'
 * when it cannot be read (gone) */
char t_state(pid_t pid, pid_t tid)
{
	char path[64], st[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return '?';
	ssize_t n = read(f, st, sizeof(st) - 1);
	close(f);
	if (n <= 0)
		return '?';
	st[n] = 0;
	char *p = strrchr(st, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* until thread tid of process pid is in state want ('S': asleep; 'T':
 * stopped).  For 'S' the caller knows the thread was awake since its last
 * sleep (it woke it through the sync pipe, or started it) and has nothing
 * to sleep in before the call it is sequenced into: the sleep seen is that
 * call blocking, on either transport (kernel TCP sleeps in the socket call,
 * the interposer in a futex or poll inside it). */
void wait_state(pid_t pid, pid_t tid, char want, const char *what)
{
	long t0 = t_now_ms();
	for (;;) {
		char s = t_state(pid, tid);
		if (s == want)
			return;
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("%s: thread %d of %d not in state %c after %d ms (state %c)",
			      what, (int)tid, (int)pid, want, T_GUARD_MS, s);
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

/* the same, giving up (false) after ms: for a thread that may wait without
 * sleeping (the interposer polls in some waits), where the scenario's
 * outcome does not depend on it */
bool wait_state_for(pid_t pid, pid_t tid, char want, int ms)
{
	long t0 = t_now_ms();
	while (t_state(pid, tid) != want) {
		if (t_now_ms() - t0 > ms)
			return false;
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
	return true;
}

/* the other process of the scenario (the server, in the client) is asleep
 * (its main thread): it woke up at our last tell() and went on into the
 * blocking call its side is at */
void await_peer_asleep(void)
{
	pid_t p = t_child ? t_srv : t_pid;
	wait_state(p, p, 'S', "the peer asleep");
}

/* a thread of this process is asleep */
void wait_thread_asleep(pid_t tid)
{
	wait_state(getpid(), tid, 'S', "own thread asleep");
}

/* the process's name (/proc/PID/comm), "" if unknown */
void t_comm(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	int f = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = f < 0 ? -1 : read(f, buf, cap - 1);
	if (f >= 0)
		close(f);
	buf[n > 0 ? n : 0] = 0;
}

/* until the other process has exec'd (its name is no longer ours, which it
 * had from the fork) */
void await_peer_exec(void)
{
	pid_t p = t_child ? t_srv : t_pid;
	char mine[64], its[64];
	long t0 = t_now_ms();
	t_comm(getpid(), mine, sizeof(mine));
	for (;;) {
		t_comm(p, its, sizeof(its));
		if (strcmp(its, mine))
			return;
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("the peer did not exec in %d ms", T_GUARD_MS);
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

/* until poll() reports one of events on fd (silently) */
void wait_ev(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;
	while ((r = poll(&p, 1, T_GUARD_MS)) < 0 && errno == EINTR) {
	}
	if (r <= 0 || !(p.revents & (events | POLLERR | POLLHUP | POLLNVAL)))
		fatal("wait_ev: no event 0x%x on fd %d in %d ms", (unsigned)events, fd, T_GUARD_MS);
}

/* until ioctl(FIONREAD) on fd reports at least n bytes (silently): the
 * peer's bytes have arrived */
int readable_bytes(int fd)
{
	int v = -1;
	ioctl(fd, FIONREAD, &v);
	return v;
}

volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

void count_sigpipes(void)
{
	struct sigaction sa = { .sa_handler = on_sigpipe };
	sigaction(SIGPIPE, &sa, NULL);
}

void wait_inq(int fd, int n)
{
	long t0 = t_now_ms();
	for (;;) {
		int v = readable_bytes(fd);
		if (v >= n)
			return;
		if (t_now_ms() - t0 > T_GUARD_MS)
			fatal("wait_inq: %d bytes readable, not %d, after %d ms", v, n, T_GUARD_MS);
		struct timespec ts = { 0, 500000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- sequencing between the two processes ------------------------------- */

void put_bytes(const void *p, size_t n)
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

void get_bytes(void *p, size_t n)
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

void tell(void)
{
	put_bytes("x", 1);
}

void await_peer(void)
{
	char c;
	get_bytes(&c, 1);
}

void tell_u64(uint64_t v)
{
	put_bytes(&v, sizeof(v));
}

uint64_t await_u64(void)
{
	uint64_t v;
	get_bytes(&v, sizeof(v));
	return v;
}

/* ---- data ---------------------------------------------------------------- */

void pattern(void *buf, size_t n, uint64_t off, unsigned seed)
{
	unsigned char *b = buf;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = off + i;
		b[i] = (unsigned char)(x * 131u + seed + (x >> 9) + (x >> 17));
	}
}

uint64_t ck(uint64_t h, const void *buf, size_t n)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* send all of buf, waiting (poll) when the socket is nonblocking */
ssize_t send_all(int fd, const void *buf, size_t n)
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
ssize_t recv_all(int fd, void *buf, size_t n)
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
uint64_t send_pattern(int fd, size_t n, unsigned seed)
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
uint64_t recv_count(int fd, size_t n, size_t *got)
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

uint64_t pattern_ck(size_t n, unsigned seed)
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

int pattern_file(const char *name, size_t size, unsigned seed)
{
	char path[256];
	snprintf(path, sizeof(path), "/tmp/%s.XXXXXX", name);
	int f = mkstemp(path);
	if (f < 0)
		fatal("mkstemp");
	unlink(path);
	static char buf[65536];
	for (size_t off = 0; off < size; off += sizeof(buf)) {
		pattern(buf, sizeof(buf), off, seed);
		if (write(f, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			fatal("write file");
	}
	return f;
}

/* send bytes off..off+n of the pattern seed (fails loudly if it cannot) */
void send_at(int fd, size_t off, size_t n, unsigned seed)
{
	static char buf[65536];
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		pattern(buf, k, off + done, seed);
		if (send_all(fd, buf, k) != (ssize_t)k)
			fatal("send");
		done += k;
	}
}

/* receive n bytes: exactly bytes off..off+n of the pattern seed? */
bool recv_exact_at(int fd, size_t off, size_t n, unsigned seed)
{
	static char buf[65536], want[65536];
	bool exact = true;
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		pattern(want, k, off + done, seed);
		if (recv_all(fd, buf, k) != (ssize_t)k)
			return false;
		exact = exact && !memcmp(buf, want, k);
		done += k;
	}
	return exact;
}

/* ---- connections ----------------------------------------------------------- */

struct sockaddr_in t_addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(t_port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

int make_listener(void)
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
int raw_connect(void)
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
void hs_client(int fd)
{
	char c = 'h';
	if (send_all(fd, &c, 1) != 1 || recv_all(fd, &c, 1) != 1 || c != 'H')
		fatal("handshake (client)");
}

void hs_server(int fd)
{
	char c = 0;
	if (recv_all(fd, &c, 1) != 1 || c != 'h')
		fatal("handshake (server)");
	c = 'H';
	if (send_all(fd, &c, 1) != 1)
		fatal("handshake (server)");
}

int client_conn(void)
{
	int fd = raw_connect();
	hs_client(fd);
	return fd;
}

int server_conn(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		fatal("accept");
	hs_server(fd);
	return fd;
}

void set_rcvbuf(int lfd, int bytes)
{
	if (setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)) < 0)
		fatal("SO_RCVBUF");
}

int sndbuf_socket(int bytes)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) < 0)
		fatal("socket/SO_SNDBUF");
	return fd;
}

void connect_hs(int fd)
{
	struct sockaddr_in a = t_addr();
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fatal("connect");
	hs_client(fd);
}

/* client: a child that connects and waits to be killed; its pid once
 * connected */
pid_t connected_kid(const char *what)
{
	int p[2];
	if (pipe(p) < 0)
		fatal("pipe");
	pid_t kid = t_fork();
	if (kid == 0) {
		alarm(20);
		close(p[0]);
		int fd = client_conn();
		if (write(p[1], "c", 1) != 1)
			_exit(1);
		for (;;)
			pause();
		(void)fd;
	}
	close(p[1]);
	char x;
	if (read(p[0], &x, 1) != 1)
		fatal("%s", what);
	close(p[0]);
	return kid;
}

ssize_t send_fd(int sp, int fd)
{
	char c = 'f', cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	return sendmsg(sp, &m, 0);
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

int run(void (*server)(int lfd), void (*client)(void))
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
	t_srv = getpid();
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

void exec_python(char *argv[], bool keep_preload)
{
	fflush(t_out);
	if (dup2(fileno(t_out), 1) < 0)
		fatal("dup2");
	if (!keep_preload)
		unsetenv("LD_PRELOAD");
	execvp("python3", argv);
	fatal("exec python3");
}
