/* SPDX-License-Identifier: MIT */
/*
 * sockbench: a plain-socket benchmark (libc only, no shortcut API), run
 * once on kernel TCP and once under `shortcut run` by bench/interposed.py.
 *
 *   sockbench conn   [--clients C] [--server K]
 *                                   connect/send/recv/close loop; C client threads
 *                                   against a server of kind K: blocking (one
 *                                   connection at a time; the default for C = 1),
 *                                   epoll (one thread; the default for C > 1),
 *                                   threads (a thread per connection) or fork (a
 *                                   process per connection)
 *   sockbench rr     [--pairs P]    request/response on one connection; P > 1: P
 *                                   client processes, each with its server process
 *   sockbench stream                one-way stream
 *   sockbench rate   --rate R       request/response at R requests/s (open loop):
 *                                   CPU time of client and server per request
 *   sockbench setup  [--conns N] [--calls K]
 *                                   one client opens N connections to an epoll
 *                                   server, a 1-byte round trip on each, keeping
 *                                   them open; then the server times K calls of
 *                                   epoll_wait(timeout 0) with nothing ready
 *   common: [--seconds S] [--size N] [--unix] [--addr A] [--plain-server]
 *
 * --plain-server (conn, rr): the server runs without the library: its
 * process execs sockbench again with LD_PRELOAD removed and makes the
 * listener there (a client under `shortcut run` then meets a port no
 * accelerated listener serves: what its connections cost that stay on TCP).
 *
 * Forks the server(s) on A (default 127.0.0.1) or, with --unix, on a
 * Unix-domain stream socket at a fresh path in $TMPDIR or /tmp, and prints
 * one JSON line:
 *   conn, rr, stream: {"mode", "transport": "tcp"|"unix", "size", "seconds",
 *                      "ops", "ops_per_s", "gbytes_per_s", "clients", "pairs"}
 *   rate:  {"mode", "transport", "size", "rate", "seconds", "requests",
 *           "achieved_per_s", "client_cpu_s", "server_cpu_s", "cpu_us_per_req",
 *           "latency_p50_us", "latency_p99_us"}
 *   setup: {"mode", "transport", "conns", "setup_s", "conns_per_s",
 *           "registered", "epoll_wait0_ns", "epoll_wait0_ready"}
 *
 * rate: a sender thread sends request i at the absolute time start + i/R
 * (clock_nanosleep TIMER_ABSTIME; a late request goes at once), a receiver
 * thread reads the responses; the first tenth is warm-up.  CPU time is
 * CLOCK_PROCESS_CPUTIME_ID of the client and the server's process CPU clock
 * (clock_getcpuclockid), every thread of both, over the measured requests.
 * Latency is from a request's scheduled time to its response.
 * setup raises RLIMIT_NOFILE (both processes) to 8N+1000, or to the hard
 * limit; "registered" counts the listener and the N connections.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double cpu_s(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) < 0)
		return -1;
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "sockbench[%d]: %s: %s\n", (int)getpid(), what, strerror(errno));
	exit(1);
}

static int full(ssize_t (*op)(int, void *, size_t, int), int fd, char *buf, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = op(fd, buf + done, n - done, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static ssize_t send_(int fd, void *b, size_t n, int f) { return send(fd, b, n, f | MSG_NOSIGNAL); }

static int use_unix;
static struct sockaddr_storage ss;
static socklen_t sl;

static void nodelay(int fd)
{
	int one = 1;
	if (!use_unix)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The next connection of a blocking listener, TCP_NODELAY set. */
static int accept_next(int lfd)
{
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0) {
			nodelay(c);
			return c;
		}
		if (errno != EINTR && errno != ECONNABORTED)
			die("accept");
	}
}

/* conn (one client), rr, stream, rate: a blocking accept loop, one
 * connection at a time. */
static void server(int lfd, const char *mode, size_t size)
{
	char *buf = malloc(size);
	for (;;) {
		int c = accept_next(lfd);
		if (!strcmp(mode, "stream")) {
			while (recv(c, buf, size, 0) > 0) {
			}
			send_(c, "k", 1, 0);
		} else {
			while (full(recv, c, buf, size) == 0 && full(send_, c, buf, size) == 0) {
				if (!strcmp(mode, "conn"))
					break;
			}
		}
		close(c);
	}
}

/* conn --server threads: a thread per accepted connection. */
struct one_conn {
	int fd;
	size_t size;
};

/* One connection's request of size bytes, answered. */
static void answer(int fd, size_t size)
{
	char *buf = malloc(size);
	if (buf && full(recv, fd, buf, size) == 0)
		full(send_, fd, buf, size);
	free(buf);
}

static void *answer_one(void *arg)
{
	struct one_conn *o = arg;
	answer(o->fd, o->size);
	close(o->fd);
	free(o);
	return NULL;
}

/* conn --server threads|fork: accept, then a detached thread or a child
 * process answers the connection (its request, the answer, close). */
static void server_spawning(int lfd, size_t size, int forks)
{
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (forks)
		signal(SIGCHLD, SIG_IGN);       /* children reaped by the kernel */
	for (;;) {
		int c = accept_next(lfd);
		if (forks) {
			pid_t p = fork();
			if (p < 0)
				die("fork");
			if (p == 0) {
				answer(c, size);
				_exit(0);
			}
			close(c);
			continue;
		}
		struct one_conn *o = malloc(sizeof(*o));
		pthread_t tid;
		if (!o)
			die("malloc");
		*o = (struct one_conn){.fd = c, .size = size};
		if (pthread_create(&tid, &at, answer_one, o))
			die("pthread_create");
	}
}

/* What the epoll server reports after timing epoll_wait(0). */
struct wait0 {
	double ns_per_call;
	long ready;
	long registered;
};

/* conn --clients, setup: one thread, one level-triggered epoll set holding
 * the listener and every connection.  A connection that has sent `size`
 * bytes gets `size` bytes back and is closed (keep: kept for another).
 * After `want` answers (want > 0) it waits for a byte on gofd, times
 * `calls` epoll_wait(timeout 0) calls with nothing ready, writes a struct
 * wait0 to resfd and goes on serving. */
static void server_epoll(int lfd, size_t size, int keep, long want, int gofd, int resfd, long calls)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("getrlimit");
	size_t nfds = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 22) ? 1u << 22 : rl.rlim_cur;
	size_t *got = calloc(nfds, sizeof(*got));
	char *buf = calloc(1, size);
	int ep = epoll_create1(0);
	if (!got || !buf || ep < 0)
		die("epoll server set-up");
	if (fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) < 0)
		die("fcntl");
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		die("epoll_ctl");
	long answered = 0, registered = 1;
	struct epoll_event evs[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				for (;;) {
					int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
					if (c < 0) {
						if (errno == EAGAIN || errno == EWOULDBLOCK)
							break;
						if (errno == EINTR || errno == ECONNABORTED)
							continue;
						die("accept4");
					}
					if ((size_t)c >= nfds) {
						errno = EMFILE;
						die("accept4");
					}
					nodelay(c);
					got[c] = 0;
					ev.events = EPOLLIN;
					ev.data.fd = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) < 0)
						die("epoll_ctl");
					registered++;
				}
				continue;
			}
			ssize_t r = recv(fd, buf, size - got[fd], 0);
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
				continue;
			if (r <= 0) {
				close(fd);      /* leaves the set */
				registered--;
				continue;
			}
			got[fd] += (size_t)r;
			if (got[fd] < size)
				continue;
			got[fd] = 0;
			/* a fresh connection's send buffer takes `size` (<= 64 KiB) at once */
			if (send_(fd, buf, size, 0) != (ssize_t)size)
				die("answer");
			if (!keep) {
				close(fd);
				registered--;
			}
			if (++answered != want)
				continue;
			char go;
			if (read(gofd, &go, 1) != 1)
				die("go");
			struct wait0 w = {.registered = registered};
			uint64_t t0 = now_ns();
			for (long k = 0; k < calls; k++) {
				int m = epoll_wait(ep, evs, 256, 0);
				if (m > 0)
					w.ready += m;
			}
			w.ns_per_call = (double)(now_ns() - t0) / (double)calls;
			if (write(resfd, &w, sizeof(w)) != sizeof(w))
				die("result");
			break;          /* evs was overwritten */
		}
	}
}

static int dial(void)
{
	int fd = socket(ss.ss_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	nodelay(fd);
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0)
		die("connect");
	return fd;
}

/* ---- conn --clients C: C threads of connect/exchange/close ---------------- */

struct conn_thread {
	pthread_t tid;
	pthread_barrier_t *start;
	size_t size;
	double seconds, t0, end;
	long ops;
};

static void *conn_client(void *arg)
{
	struct conn_thread *t = arg;
	char *buf = calloc(1, t->size);
	pthread_barrier_wait(t->start);
	double tn = t->t0;
	while (tn - t->t0 < t->seconds) {
		for (int k = 0; k < 16; k++, t->ops++) {
			int fd = dial();
			if (full(send_, fd, buf, t->size) || full(recv, fd, buf, t->size))
				die("exchange");
			close(fd);
		}
		tn = now();
	}
	t->end = tn;
	free(buf);
	return NULL;
}

/* ---- rate: open-loop request/response at a fixed rate --------------------- */

struct rate_run {
	int fd;
	size_t size;
	double rate;
	long total, warm;
	clockid_t srv_clock;
	double t_a, cpu_cli_a, cpu_srv_a;   /* written by the sender at request `warm` */
};

static void *rate_sender(void *arg)
{
	struct rate_run *r = arg;
	char *buf = calloc(1, r->size);
	uint64_t base = now_ns() + 1000000;     /* 1 ms from now */
	for (long i = 0; i < r->total; i++) {
		uint64_t due = base + (uint64_t)((double)i * 1e9 / r->rate);
		struct timespec ts = {.tv_sec = (time_t)(due / 1000000000u),
				      .tv_nsec = (long)(due % 1000000000u)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
		}
		if (i == r->warm) {
			r->t_a = now();
			r->cpu_cli_a = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
			r->cpu_srv_a = cpu_s(r->srv_clock);
		}
		memcpy(buf, &due, sizeof(due));  /* latency counts from the scheduled time */
		if (full(send_, r->fd, buf, r->size))
			die("send");
	}
	free(buf);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void rate_client(pid_t srv, size_t size, double rate, double seconds, const char *transport)
{
	struct rate_run r = {.size = size, .rate = rate};
	r.warm = (long)(rate * seconds / 10);
	if (r.warm < 10)
		r.warm = 10;
	r.total = r.warm + (long)(rate * seconds);
	if (clock_getcpuclockid(srv, &r.srv_clock))
		die("clock_getcpuclockid");
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)r.total);
	char *buf = malloc(size);
	if (!lat || !buf)
		die("malloc");
	r.fd = dial();
	pthread_t tid;
	if (pthread_create(&tid, NULL, rate_sender, &r))
		die("pthread_create");
	for (long i = 0; i < r.total; i++) {
		if (full(recv, r.fd, buf, size))
			die("recv");
		uint64_t due;
		memcpy(&due, buf, sizeof(due));
		lat[i] = now_ns() - due;
	}
	double t_b = now(), cpu_cli_b = cpu_s(CLOCK_PROCESS_CPUTIME_ID), cpu_srv_b = cpu_s(r.srv_clock);
	pthread_join(tid, NULL);
	close(r.fd);
	long n = r.total - r.warm;
	qsort(lat + r.warm, (size_t)n, sizeof(*lat), cmp_u64);
	double el = t_b - r.t_a, cc = cpu_cli_b - r.cpu_cli_a, cs = cpu_srv_b - r.cpu_srv_a;
	printf("{\"mode\": \"rate\", \"transport\": \"%s\", \"size\": %zu, \"rate\": %.0f, "
	       "\"seconds\": %.3f, \"requests\": %ld, \"achieved_per_s\": %.1f, "
	       "\"client_cpu_s\": %.6f, \"server_cpu_s\": %.6f, \"cpu_us_per_req\": %.3f, "
	       "\"latency_p50_us\": %.2f, \"latency_p99_us\": %.2f}\n",
	       transport, size, rate, el, n, n / el, cc, cs, (cc + cs) / n * 1e6,
	       lat[r.warm + n / 2] / 1e3, lat[r.warm + n * 99 / 100] / 1e3);
}

/* ---- rr --pairs P: P client processes, results through a pipe ------------ */

struct pair_result {
	long ops;
	double seconds;
};

static void rr_loop(int fd, char *buf, size_t size, double seconds, struct pair_result *res)
{
	double t0 = now(), t = t0;
	long ops = 0;
	while (t - t0 < seconds) {
		for (int k = 0; k < 64; k++, ops++)
			if (full(send_, fd, buf, size) || full(recv, fd, buf, size))
				die("exchange");
		t = now();
	}
	res->ops = ops;
	res->seconds = t - t0;
}

static void raise_nofile(rlim_t want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("getrlimit");
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want)
		return;
	struct rlimit nl = {want, rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? rl.rlim_max : want};
	if (setrlimit(RLIMIT_NOFILE, &nl) < 0) {    /* no CAP_SYS_RESOURCE: the hard limit */
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ss and sl: addr, port 0.  -1: addr is no IPv4 address. */
static int set_addr(const char *addr)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	memset(&ss, 0, sizeof(ss));
	in->sin_family = AF_INET;
	sl = sizeof(*in);
	if (inet_pton(AF_INET, addr, &in->sin_addr) == 1)
		return 0;
	fprintf(stderr, "sockbench: --addr %s: not an IPv4 address\n", addr);
	return -1;
}

/* The listener on addr (port 0: the kernel's pick) or, with --unix, on a
 * fresh path; fills ss and sl with its address.  -1: addr is no IPv4
 * address. */
static int make_listener(const char *addr)
{
	struct sockaddr *sa = (struct sockaddr *)&ss;
	int lfd;
	memset(&ss, 0, sizeof(ss));
	if (use_unix) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		const char *dir = getenv("TMPDIR");
		un->sun_family = AF_UNIX;
		if (!dir || !*dir || strlen(dir) > 60)
			dir = "/tmp";
		snprintf(un->sun_path, sizeof(un->sun_path), "%s/sockbench-%d.sock", dir, (int)getpid());
		unlink(un->sun_path);
		sl = sizeof(*un);
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, sa, sl) < 0 || listen(lfd, 4096) < 0)
			die("listen");
		return lfd;
	}
	if (set_addr(addr) < 0)
		return -1;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	if (lfd >= 0)
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, sa, sl) < 0 || listen(lfd, 4096) < 0 ||
	    getsockname(lfd, sa, &sl) < 0)
		die("listen");
	return lfd;
}

enum server_kind { SRV_DEFAULT, SRV_BLOCKING, SRV_EPOLL, SRV_THREADS, SRV_FORK };

/* One server process's loop (never returns). */
static void serve(int lfd, enum server_kind kind, const char *mode, size_t size)
{
	if (kind == SRV_EPOLL)
		server_epoll(lfd, size, 0, 0, -1, -1, 0);
	else if (kind == SRV_THREADS || kind == SRV_FORK)
		server_spawning(lfd, size, kind == SRV_FORK);
	else
		server(lfd, mode, size);
	_exit(0);
}

/* --plain-server: sockbench again, without the library, as the server; it
 * reports its listener's port through a pipe.  Returns its pid. */
static pid_t plain_server(char **argv)
{
	int p[2];
	if (pipe(p) < 0)
		die("pipe");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char v[16];
		close(p[0]);
		snprintf(v, sizeof(v), "%d", p[1]);
		setenv("SOCKBENCH_SERVE_FD", v, 1);
		unsetenv("LD_PRELOAD");
		execv("/proc/self/exe", argv);
		die("exec");
	}
	close(p[1]);
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	if (read(p[0], &in->sin_port, sizeof(in->sin_port)) != sizeof(in->sin_port))
		die("the plain server's port");
	close(p[0]);
	return pid;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *addr = "127.0.0.1";
	double seconds = 1, rate = 0;
	size_t size = 64;
	long clients = 1, pairs = 1, conns = 10000, calls = 100000;
	enum server_kind kind = SRV_DEFAULT;
	int plain = 0;

	int bad = 0;
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--unix"))
			use_unix = 1;
		else if (!strcmp(argv[i], "--seconds") && v)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--size") && v)
			size = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--clients") && v)
			clients = atol(argv[++i]);
		else if (!strcmp(argv[i], "--pairs") && v)
			pairs = atol(argv[++i]);
		else if (!strcmp(argv[i], "--rate") && v)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--conns") && v)
			conns = atol(argv[++i]);
		else if (!strcmp(argv[i], "--calls") && v)
			calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--addr") && v)
			addr = argv[++i];
		else if (!strcmp(argv[i], "--plain-server"))
			plain = 1;
		else if (!strcmp(argv[i], "--server") && v) {
			const char *k = argv[++i];
			kind = !strcmp(k, "blocking") ? SRV_BLOCKING : !strcmp(k, "epoll") ? SRV_EPOLL :
			       !strcmp(k, "threads") ? SRV_THREADS : !strcmp(k, "fork") ? SRV_FORK : -1;
			bad |= (int)kind < 0;
		} else
			bad = 1;
	}
	int is_rate = !strcmp(mode, "rate"), is_setup = !strcmp(mode, "setup");
	if (is_setup && !bad)
		size = 1;
	if ((strcmp(mode, "conn") && strcmp(mode, "rr") && strcmp(mode, "stream") && !is_rate && !is_setup) ||
	    bad || seconds <= 0 || size < 1 || size > (64u << 20) ||
	    clients < 1 || clients > MAX_PROCS || (clients > 1 && strcmp(mode, "conn")) ||
	    pairs < 1 || pairs > MAX_PROCS || (pairs > 1 && strcmp(mode, "rr")) ||
	    (is_rate && (rate <= 0 || size < sizeof(uint64_t))) || conns < 1 || calls < 1 ||
	    (clients > 1 && size > 65536) || (kind != SRV_DEFAULT && strcmp(mode, "conn")) ||
	    (plain && ((strcmp(mode, "conn") && strcmp(mode, "rr")) || use_unix || pairs > 1))) {
		fprintf(stderr, "usage: sockbench conn [--clients C] [--server blocking|epoll|threads|fork] |\n"
				"                 rr [--pairs P] | stream | rate --rate R | setup [--conns N] [--calls K]\n"
				"                 [--seconds S] [--size N] [--unix] [--addr A] [--plain-server]\n");
		return 2;
	}
	if (kind == SRV_DEFAULT)
		kind = clients > 1 ? SRV_EPOLL : SRV_BLOCKING;
	if (getenv("SOCKBENCH_SERVE_FD")) {         /* --plain-server's server */
		int fd = atoi(getenv("SOCKBENCH_SERVE_FD")), lfd = make_listener(addr);
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (lfd < 0 || write(fd, &in->sin_port, sizeof(in->sin_port)) != sizeof(in->sin_port))
			die("plain server");
		close(fd);
		serve(lfd, kind, mode, size);
	}
	signal(SIGPIPE, SIG_IGN);
	if (is_setup)
		raise_nofile((rlim_t)(8 * conns + 1000));
	int lfd = -1;
	if ((plain ? set_addr(addr) : (lfd = make_listener(addr))) < 0)
		return 2;
	int go[2], res[2];
	if (pipe(go) < 0 || pipe(res) < 0)
		die("pipe");
	/* the servers: one, or one per pair */
	pid_t srv[MAX_PROCS];
	if (plain)
		srv[0] = plain_server(argv);
	for (long i = 0; i < pairs && !plain; i++) {
		srv[i] = fork();
		if (srv[i] < 0)
			die("fork");
		if (srv[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);       /* a client that dies takes it along */
			close(go[1]);
			close(res[0]);
			if (!is_setup)
				close(res[1]);
			if (is_setup)
				server_epoll(lfd, size, 1, conns, go[0], res[1], calls);
			serve(lfd, kind, mode, size);
		}
	}
	if (lfd >= 0)
		close(lfd);
	if (pairs == 1) {       /* else the client processes need them first */
		close(go[0]);
		close(res[1]);
	}
	const char *transport = use_unix ? "unix" : "tcp";
	char *buf = calloc(1, size);
	long ops = 0;
	double t0 = now(), t = t0;
	if (is_rate) {
		rate_client(srv[0], size, rate, seconds, transport);
	} else if (is_setup) {
		int *fds = malloc(sizeof(*fds) * (size_t)conns);
		if (!fds)
			die("malloc");
		t0 = now();
		for (long i = 0; i < conns; i++) {
			fds[i] = dial();
			if (full(send_, fds[i], buf, 1) || full(recv, fds[i], buf, 1))
				die("round trip");
		}
		t = now();
		struct wait0 w;
		if (write(go[1], "g", 1) != 1 || read(res[0], &w, sizeof(w)) != sizeof(w))
			die("epoll_wait(0) result");
		printf("{\"mode\": \"setup\", \"transport\": \"%s\", \"conns\": %ld, \"setup_s\": %.4f, "
		       "\"conns_per_s\": %.1f, \"registered\": %ld, \"epoll_wait0_ns\": %.1f, "
		       "\"epoll_wait0_ready\": %ld}\n",
		       transport, conns, t - t0, conns / (t - t0), w.registered, w.ns_per_call, w.ready);
		/* the server goes first: its side keeps the TIME_WAIT, not our ports */
		kill(srv[0], SIGKILL);
		waitpid(srv[0], NULL, 0);
		for (long i = 0; i < conns; i++)
			close(fds[i]);
		pairs = 0;
	} else if (!strcmp(mode, "conn") && clients > 1) {
		struct conn_thread th[MAX_PROCS];
		pthread_barrier_t start;
		pthread_barrier_init(&start, NULL, (unsigned)clients + 1);
		for (long i = 0; i < clients; i++) {
			th[i] = (struct conn_thread){.start = &start, .size = size, .seconds = seconds};
			if (pthread_create(&th[i].tid, NULL, conn_client, &th[i]))
				die("pthread_create");
		}
		t0 = now();
		for (long i = 0; i < clients; i++)   /* read by the threads after the barrier */
			th[i].t0 = t0;
		pthread_barrier_wait(&start);
		for (long i = 0; i < clients; i++) {
			pthread_join(th[i].tid, NULL);
			ops += th[i].ops;
			if (th[i].end > t)
				t = th[i].end;
		}
	} else if (!strcmp(mode, "conn")) {
		while (t - t0 < seconds) {
			for (int k = 0; k < 16; k++, ops++) {
				int fd = dial();
				if (full(send_, fd, buf, size) || full(recv, fd, buf, size))
					die("exchange");
				close(fd);
			}
			t = now();
		}
	} else if (pairs > 1) {
		/* every client connects, then all start together (go closed) */
		pid_t cli[MAX_PROCS];
		for (long i = 0; i < pairs; i++) {
			cli[i] = fork();
			if (cli[i] < 0)
				die("fork");
			if (cli[i] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				close(go[1]);
				close(res[0]);
				int fd = dial();
				char g;
				if (read(go[0], &g, 1) != 0)
					die("start");
				struct pair_result r;
				rr_loop(fd, buf, size, seconds, &r);
				if (write(res[1], &r, sizeof(r)) != sizeof(r))
					die("result");
				_exit(0);
			}
		}
		close(go[0]);
		close(go[1]);
		close(res[1]);
		for (long i = 0; i < pairs; i++) {
			struct pair_result r;
			if (read(res[0], &r, sizeof(r)) != sizeof(r))
				die("a client failed");
			ops += (long)(r.ops * seconds / r.seconds);  /* each at its own rate, over S */
		}
		for (long i = 0; i < pairs; i++)
			waitpid(cli[i], NULL, 0);
		t = t0 + seconds;
	} else {
		int fd = dial();
		if (!strcmp(mode, "rr")) {
			struct pair_result r;
			rr_loop(fd, buf, size, seconds, &r);
			ops = r.ops;
			t = t0 + r.seconds;
		} else {
			while (t - t0 < seconds) {
				for (int k = 0; k < 16; k++, ops++)
					if (full(send_, fd, buf, size))
						die("send");
				t = now();
			}
			shutdown(fd, SHUT_WR);
			char k;
			if (recv(fd, &k, 1, 0) != 1)    /* everything was read */
				die("stream end");
			t = now();
		}
		close(fd);
	}
	for (long i = 0; i < pairs; i++) {
		kill(srv[i], SIGTERM);
		waitpid(srv[i], NULL, 0);
	}
	if (use_unix)
		unlink(((struct sockaddr_un *)&ss)->sun_path);
	if (is_rate || is_setup)
		return 0;
	double el = t - t0;
	printf("{\"mode\": \"%s\", \"transport\": \"%s\", \"size\": %zu, \"seconds\": %.3f, "
	       "\"ops\": %ld, \"ops_per_s\": %.1f, \"gbytes_per_s\": %.4f, \"clients\": %ld, \"pairs\": %ld}\n",
	       mode, transport, size, el, ops, ops / el, ops * (double)size / el / 1e9, clients, pairs);
	return 0;
}
