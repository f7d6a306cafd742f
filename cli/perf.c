// SPDX-License-Identifier: MIT
/*
 * shortcut perf — kernel TCP loopback, a Unix-domain stream socket and
 * shortcut side by side: same sizes, same run, transports alternating round
 * robin so that drift (clock frequency, other load) hits all of them alike.
 * Bare shared-memory ping-pong (shm) and memcpy bandwidth are measured in the
 * same run as the floor the hardware allows.
 *
 * Every connected measurement runs between two fresh child processes; the
 * parent only forks, waits and tallies, so it never holds connection state
 * that a child would inherit across fork.  The children share one anonymous
 * MAP_SHARED page with the parent: the shm flags and the measured result.
 *
 * The transports differ only in a small ops table; the pingpong and stream
 * bodies are written once against it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <linux/futex.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shortcut.h"
#include "cli.h"
#include "perf.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void vperr(const char *fmt, va_list ap)
{
	fputs("shortcut perf: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void sc__perf_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vperr(fmt, ap);
	va_end(ap);
}

int sc__perf_xerr(const struct xport *x, const char *what, int err)
{
	sc__perf_err("%s %s: %s: %s", x->ops->name, x->role, what, strerror(-err));
	return err;
}

/* ---- the generic bodies ------------------------------------------------ */

static ssize_t send_all(struct xport *x, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = x->ops->send(x, p, len);

		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n ? n : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* len bytes, fewer only at end of stream, or -errno */
static ssize_t recv_all(struct xport *x, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = x->ops->recv(x, (char *)buf + got, len - got, true);

		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void *xalloc(struct xport *x, size_t len)
{
	void *p = malloc(len);

	if (!p)
		sc__perf_xerr(x, "malloc", -ENOMEM);
	else	/* fault the pages in now, not while timing */
		memset(p, 0, len);
	return p;
}

/*
 * Call step() until ns have passed.  The clock is read once per batch, and
 * batches grow until one lasts ~50 us, so reading it costs nothing even next
 * to a 100 ns round trip.
 */
static int timed_loop(int (*step)(void *), void *arg, uint64_t ns,
		      uint64_t *iters, uint64_t *elapsed)
{
	uint64_t t0 = now_ns(), last = t0, t, n = 0, batch = 1;
	int err;

	for (;;) {
		for (uint64_t i = 0; i < batch; i++) {
			err = step(arg);
			if (err)
				return err;
		}
		n += batch;
		t = now_ns();
		if (t - t0 >= ns)
			break;
		if (t - last < 50000 && batch < (1u << 20))
			batch *= 2;
		last = t;
	}
	*iters = n;
	*elapsed = t - t0;
	return 0;
}

static uint64_t warmup_ns(const struct cfg *cfg)
{
	double s = cfg->seconds / 10 < 0.05 ? cfg->seconds / 10 : 0.05;

	return (uint64_t)(s * 1e9);
}

struct pp_ctx {
	struct xport *x;
	size_t size;
	char *tx, *rx;
	uint64_t seq;
};

static int pp_round(void *arg)
{
	struct pp_ctx *p = arg;
	struct xport *x = p->x;
	size_t k = p->size < 8 ? p->size : 8;
	uint64_t seq = ++p->seq;
	ssize_t n;

	/* stamp both ends of each message: a stale or torn echo can't pass */
	memcpy(p->tx, &seq, k);
	if (p->size > k)
		p->tx[p->size - 1] = (char)seq;
	n = send_all(x, p->tx, p->size);
	if (n < 0)
		return sc__perf_xerr(x, "send", (int)n);
	n = recv_all(x, p->rx, p->size);
	if (n < 0)
		return sc__perf_xerr(x, "recv", (int)n);
	if ((size_t)n < p->size) {
		sc__perf_err("%s client: end of stream after %zd of %zu bytes of round trip %llu",
		     x->ops->name, n, p->size, (unsigned long long)seq);
		return -EPIPE;
	}
	if (!x->ops->bare && (memcmp(p->tx, p->rx, k) ||
			      p->tx[p->size - 1] != p->rx[p->size - 1])) {
		sc__perf_err("%s client: round trip %llu: echoed bytes differ from those sent",
		     x->ops->name, (unsigned long long)seq);
		return -EBADMSG;
	}
	return 0;
}

static int pp_client(struct xport *x, const struct cfg *cfg)
{
	struct pp_ctx p = { .x = x, .size = cfg->size };
	struct run_result *res = &x->sh->res;
	uint64_t iters, ns;
	ssize_t n;
	int err = -ENOMEM;

	p.tx = xalloc(x, cfg->size);
	p.rx = p.tx ? xalloc(x, cfg->size) : NULL;
	if (!p.rx)
		goto out;
	err = timed_loop(pp_round, &p, warmup_ns(cfg), &iters, &ns);
	if (!err)
		err = timed_loop(pp_round, &p, (uint64_t)(cfg->seconds * 1e9),
				 &res->iters, &res->ns);
	if (err)
		goto out;
	err = x->ops->shutdown(x);
	if (err) {
		sc__perf_xerr(x, "shutdown", err);
		goto out;
	}
	/* the server closes once it has seen our end: nothing may follow */
	while ((n = x->ops->recv(x, p.rx, cfg->size, false)) == -EINTR)
		;
	if (n) {
		err = n < 0 ? sc__perf_xerr(x, "recv", (int)n) : -EBADMSG;
		if (n > 0)
			sc__perf_err("%s client: %zd stray bytes after the last echo",
			     x->ops->name, n);
	}
out:
	free(p.tx);
	free(p.rx);
	return err;
}

static int pp_server(struct xport *x, const struct cfg *cfg)
{
	char *buf = xalloc(x, cfg->size);
	ssize_t n;
	int err = buf ? 0 : -ENOMEM;

	while (!err) {
		n = recv_all(x, buf, cfg->size);
		if (n == 0)
			break;		/* the client is done */
		if (n < 0) {
			err = sc__perf_xerr(x, "recv", (int)n);
		} else if ((size_t)n < cfg->size) {
			sc__perf_err("%s server: end of stream after %zd of %zu bytes",
			     x->ops->name, n, cfg->size);
			err = -EPIPE;
		} else {
			n = send_all(x, buf, cfg->size);
			if (n < 0)
				err = sc__perf_xerr(x, "send", (int)n);
		}
	}
	free(buf);
	return err;
}

/* Stream content: byte at stream offset o is (o mod size) mod 251. */
static inline char st_byte(uint64_t off, size_t size)
{
	return (char)((off % size) % 251);
}

struct st_ctx {
	struct xport *x;
	const char *buf;
	size_t size;
	uint64_t sent;
};

static int st_step(void *arg)
{
	struct st_ctx *s = arg;
	ssize_t n = send_all(s->x, s->buf, s->size);

	if (n < 0)
		return sc__perf_xerr(s->x, "send", (int)n);
	s->sent += s->size;
	return 0;
}

static int st_sender(struct xport *x, const struct cfg *cfg)
{
	char *buf = xalloc(x, cfg->size);
	struct st_ctx s = { .x = x, .buf = buf, .size = cfg->size };
	uint64_t iters, ns;
	ssize_t n;
	char go;
	int err;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->size; i++)
		buf[i] = st_byte(i, cfg->size);
	/* wait for the receiver's go: its clock starts with it, ours too */
	n = recv_all(x, &go, 1);
	if (n != 1) {
		err = n < 0 ? sc__perf_xerr(x, "recv", (int)n) : sc__perf_xerr(x, "recv", -EPIPE);
		goto out;
	}
	err = timed_loop(st_step, &s, (uint64_t)(cfg->seconds * 1e9), &iters, &ns);
	if (err)
		goto out;
	x->sh->res.sent = s.sent;
	err = x->ops->shutdown(x);
	if (err) {
		sc__perf_xerr(x, "shutdown", err);
		goto out;
	}
	/* linger until the receiver has everything and closes */
	while ((n = x->ops->recv(x, buf, cfg->size, false)) == -EINTR)
		;
	if (n) {
		err = n < 0 ? sc__perf_xerr(x, "recv", (int)n) : -EBADMSG;
		if (n > 0)
			sc__perf_err("%s sender: %zd unexpected bytes from the receiver",
			     x->ops->name, n);
	}
out:
	free(buf);
	return err;
}

static int st_receiver(struct xport *x, const struct cfg *cfg)
{
	char *buf = xalloc(x, cfg->size);
	struct run_result *res = &x->sh->res;
	uint64_t t0, total = 0;
	ssize_t n;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	n = send_all(x, "g", 1);
	if (n < 0) {
		err = sc__perf_xerr(x, "send", (int)n);
		goto out;
	}
	t0 = now_ns();
	for (;;) {
		n = x->ops->recv(x, buf, cfg->size, false);
		if (n == -EINTR)
			continue;
		if (n < 0) {
			err = sc__perf_xerr(x, "recv", (int)n);
			goto out;
		}
		if (n == 0)
			break;
		/* spot check both ends of every read: O(1), yet any slip shows */
		if (buf[0] != st_byte(total, cfg->size) ||
		    buf[n - 1] != st_byte(total + (uint64_t)n - 1, cfg->size)) {
			sc__perf_err("%s receiver: wrong bytes in %zd-byte read at stream offset %llu",
			     x->ops->name, n, (unsigned long long)total);
			err = -EBADMSG;
			goto out;
		}
		total += (uint64_t)n;
	}
	res->ns = now_ns() - t0;
	res->bytes = total;
out:
	free(buf);
	return err;
}

/* ---- processes --------------------------------------------------------- */

/* by mode and side: side 0 listens and accepts, side 1 connects and measures */
static const char *const roles[2][2] = {
	[PINGPONG] = { "server", "client" },
	[STREAM] = { "sender", "receiver" },
};

static unsigned child_timeout(const struct cfg *cfg)
{
	return (unsigned)(cfg->seconds * 1.5) + 10;
}

static void __attribute__((noreturn))
child(struct xport *x, int side, const int ready[2], const struct cfg *cfg)
{
	int err, e;

	/* a stuck child dies of SIGALRM; the parent reports it */
	signal(SIGALRM, SIG_DFL);
	alarm(child_timeout(cfg));
	x->role = roles[cfg->mode][side];

	if (side == 0) {
		close(ready[0]);
		err = x->ops->listen(x);
		if (err) {
			sc__perf_xerr(x, "listen", err);
			_exit(1);	/* ready closes unwritten: the peer quits */
		}
		/* the port is only known now: it is the go for the peer */
		if (write(ready[1], &x->port, sizeof(x->port)) != sizeof(x->port)) {
			sc__perf_xerr(x, "write", -errno);
			_exit(1);
		}
		close(ready[1]);
		err = x->ops->accept(x);
		if (err)
			sc__perf_xerr(x, "accept", err);
		else
			err = cfg->mode == PINGPONG ? pp_server(x, cfg) : st_sender(x, cfg);
	} else {
		ssize_t n;

		close(ready[1]);
		while ((n = read(ready[0], &x->port, sizeof(x->port))) < 0 && errno == EINTR)
			;
		if (n != sizeof(x->port))
			_exit(1);	/* the listening side failed and said why */
		close(ready[0]);
		err = x->ops->connect(x);
		if (err)
			sc__perf_xerr(x, "connect", err);
		else
			err = cfg->mode == PINGPONG ? pp_client(x, cfg) : st_receiver(x, cfg);
	}
	e = x->ops->close(x);
	if (e && !err)
		err = sc__perf_xerr(x, "close", e);
	_exit(err ? 1 : 0);
}

static int reap(pid_t pid, const char *name, const char *role, const struct cfg *cfg)
{
	int st, err;

	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			err = -errno;
			sc__perf_err("%s: waitpid: %s", name, strerror(-err));
			return err;
		}
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st) ? -EIO : 0;	/* a failing child said why */
	if (WTERMSIG(st) == SIGALRM)
		sc__perf_err("%s: %s (pid %d) stuck: killed after %u s", name, role,
		     (int)pid, child_timeout(cfg));
	else
		sc__perf_err("%s: %s (pid %d) killed by signal %d (%s)", name, role,
		     (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
	return -EIO;
}

/* One repetition of one connected transport: fork both ends, wait, collect. */
static int run_pair(const struct xport_ops *ops, const struct cfg *cfg,
		    struct shared *sh, unsigned run, struct run_result *out)
{
	struct xport x = {
		.ops = ops, .lfd = -1, .fd = -1, .sh = sh,
		.nodelay = cfg->mode == PINGPONG,
	};
	pid_t pid[2] = { 0, 0 };
	int ready[2], err = 0, e;

	memset(sh, 0, sizeof(*sh));
	if (ops->prefix)
		snprintf(x.path, sizeof(x.path), "%s%d-%u", ops->prefix,
			 (int)getpid(), run);
	if (pipe2(ready, O_CLOEXEC)) {
		err = -errno;
		sc__perf_err("%s: pipe: %s", ops->name, strerror(-err));
		return err;
	}
	fflush(stdout);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			child(&x, i, ready, cfg);
		if (pid[i] < 0) {
			err = -errno;
			sc__perf_err("%s: fork: %s", ops->name, strerror(errno));
			pid[i] = 0;
			if (i)	/* the listening child would wait for nobody */
				kill(pid[0], SIGKILL);
			break;
		}
	}
	close(ready[0]);
	close(ready[1]);
	for (int i = 0; i < 2; i++) {
		if (pid[i] && (e = reap(pid[i], ops->name, roles[cfg->mode][i], cfg)) && !err)
			err = e;
	}
	if (err)
		return err;
	*out = sh->res;
	if (cfg->mode == STREAM && out->bytes != out->sent) {
		sc__perf_err("%s: receiver got %llu bytes, sender sent %llu", ops->name,
		     (unsigned long long)out->bytes, (unsigned long long)out->sent);
		return -EBADMSG;
	}
	return 0;
}

struct mc_ctx {
	char *src, *dst;
	size_t size, ring, off;
};

static int mc_step(void *arg)
{
	struct mc_ctx *m = arg;

	if (m->off + m->size > m->ring)
		m->off = 0;
	memcpy(m->dst + m->off, m->src + m->off, m->size);
	/* the copy is the point: don't let the compiler prove it dead */
	__asm__ volatile("" : : "r"(m->dst) : "memory");
	m->off += m->size;
	return 0;
}

/* memcpy reference: one process, N-byte blocks cycling through ring-sized buffers. */
static int run_memcpy(const struct cfg *cfg, struct run_result *out)
{
	struct mc_ctx m = { .size = cfg->size };
	uint64_t iters = 0;

	m.ring = cfg->size > MEMCPY_RING ? cfg->size : MEMCPY_RING;
	m.src = malloc(m.ring);
	m.dst = malloc(m.ring);
	if (!m.src || !m.dst) {
		free(m.src);
		free(m.dst);
		sc__perf_err("memcpy: malloc: %s", strerror(ENOMEM));
		return -ENOMEM;
	}
	memset(m.src, 0x5a, m.ring);
	memset(m.dst, 0, m.ring);
	timed_loop(mc_step, &m, (uint64_t)(cfg->seconds * 1e9), &iters, &out->ns);
	out->bytes = out->sent = iters * cfg->size;
	free(m.src);
	free(m.dst);
	return 0;
}

/* ---- arguments, table, JSON -------------------------------------------- */

static const struct transport {
	const char *name;
	unsigned modes;
	const struct xport_ops *ops;	/* NULL: memcpy, measured in this process */
} transports[] = {
	{ "tcp", M_PP | M_ST, &sc__perf_tcp_ops },
	{ "unix", M_PP | M_ST, &sc__perf_unix_ops },
	{ "shortcut", M_PP | M_ST, &sc__perf_sc_ops },
	{ "shm", M_PP, &sc__perf_shm_ops },
	{ "futex", M_PP, &sc__perf_futex_ops },
	{ "memcpy", M_ST, NULL },
};
#define NR_TRANSPORTS	(sizeof(transports) / sizeof(transports[0]))

/* Per selected transport: the metric per rep (rtt_us or GB/s), and msgs/s. */
struct tally {
	const struct transport *t;
	double *v, *mps;
	double med, min, max, mps_med;
};

static int usage(FILE *f, int status)
{
	fputs("usage: shortcut perf pingpong|stream --size N [--seconds S] [--spin-us U]\n"
	      "                     [--reps R] [--json] [--transports tcp,unix,shortcut,shm,futex,memcpy]\n"
	      "  --size N        message size in bytes, 1..64M (suffix k or M: KiB, MiB)\n"
	      "  --seconds S     per repetition per transport (default 0.5)\n"
	      "  --spin-us U     set SHORTCUT_SPIN_US=U for this run\n"
	      "  --reps R        repetitions, transports alternating (default 5)\n"
	      "  --json          print JSON instead of the table\n"
	      "  --transports L  subset to run (default: all that apply; shm and\n"
	      "                  futex are pingpong only, memcpy stream only)\n", f);
	return status;
}

static int __attribute__((format(printf, 1, 2))) bad(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vperr(fmt, ap);
	va_end(ap);
	return usage(stderr, 2);
}

static int parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		shift = 10, end++;
	else if (*end == 'm' || *end == 'M')
		shift = 20, end++;
	if (*end || v > PERF_MAX_SIZE)	/* also keeps the shift in range */
		return -EINVAL;
	v <<= shift;
	if (v == 0 || v > PERF_MAX_SIZE)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return errno || *end || *out > max ? -EINVAL : 0;
}

/* Fill sel[] from a comma list, in the order given; returns the count or -1. */
static int parse_transports(char *list, enum mode mode, const struct transport **sel)
{
	int n = 0;

	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		const struct transport *t = NULL;

		for (size_t i = 0; i < NR_TRANSPORTS; i++)
			if (!strcmp(tok, transports[i].name))
				t = &transports[i];
		if (!t) {
			bad("unknown transport '%s'", tok);
			return -1;
		}
		if (!(t->modes & (1u << mode))) {
			bad("transport '%s' does not apply to %s", tok,
			    mode == PINGPONG ? "pingpong" : "stream");
			return -1;
		}
		for (int i = 0; i < n; i++) {
			if (sel[i] == t) {
				bad("transport '%s' given twice", tok);
				return -1;
			}
		}
		sel[n++] = t;
	}
	if (!n)
		bad("--transports: empty list");
	return n ? n : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_REPS];

	memcpy(s, v, (size_t)n * sizeof(*v));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void summarize(struct tally *t, int reps)
{
	t->med = median(t->v, reps);
	t->mps_med = median(t->mps, reps);
	t->min = t->max = t->v[0];
	for (int i = 1; i < reps; i++) {
		t->min = t->v[i] < t->min ? t->v[i] : t->min;
		t->max = t->v[i] > t->max ? t->v[i] : t->max;
	}
}

static const struct tally *find(const struct tally *tl, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(tl[i].t->name, name))
			return &tl[i];
	return NULL;
}

/* ratio of t's median to ref's, or -1 when there is no reference */
static double ratio(const struct tally *t, const struct tally *ref)
{
	return ref && ref->med > 0 ? t->med / ref->med : -1;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void json_ratio(const char *key, double r)
{
	if (r < 0)
		printf(",\"%s\":null", key);
	else
		printf(",\"%s\":%.4f", key, r);
}

static void print_json(const struct cfg *cfg, const struct tally *tl, int n,
		       const char *spin)
{
	const struct tally *tcp = find(tl, n, "tcp"), *ux = find(tl, n, "unix");
	const char *m = cfg->mode == PINGPONG ? "rtt_us" : "gbytes_per_s";

	printf("{\"mode\":\"%s\",\"size\":%zu,\"spin_us\":",
	       cfg->mode == PINGPONG ? "pingpong" : "stream", cfg->size);
	json_str(spin ? spin : "default");
	printf(",\"reps\":%d,\"seconds\":%g,\"results\":[", cfg->reps, cfg->seconds);
	for (int i = 0; i < n; i++) {
		const struct tally *t = &tl[i];

		printf("%s{\"transport\":\"%s\",\"%s\":%.6g", i ? "," : "",
		       t->t->name, m, t->med);
		if (cfg->mode == PINGPONG)
			printf(",\"msgs_per_s\":%.6g", t->mps_med);
		printf(",\"%s_min\":%.6g,\"%s_max\":%.6g", m, t->min, m, t->max);
		json_ratio("ratio_to_tcp", ratio(t, tcp));
		json_ratio("ratio_to_unix", ratio(t, ux));
		putchar('}');
	}
	puts("]}");
}

/* about four significant digits in a 10-wide column, from 0.0001234 to 38439 */
static void print_num(double v)
{
	int prec = v >= 1000 ? 0 : v >= 100 ? 1 : v >= 10 ? 2 : v >= 1 ? 3 : 4;

	if (v > 0 && v < 0.01)
		printf(" %10.3g", v);
	else
		printf(" %10.*f", prec, v);
}

static void print_ratio(double r)
{
	if (r < 0)
		printf(" %8s", "-");
	else
		printf(" %8.3f", r);
}

static void print_table(const struct cfg *cfg, const struct tally *tl, int n,
			const char *spin)
{
	const struct tally *tcp = find(tl, n, "tcp"), *ux = find(tl, n, "unix");
	bool pp = cfg->mode == PINGPONG;

	printf("shortcut perf %s: %zu-byte messages, %d rep%s x %g s per transport, "
	       "alternating; SHORTCUT_SPIN_US=%s\n",
	       pp ? "pingpong" : "stream", cfg->size, cfg->reps,
	       cfg->reps == 1 ? "" : "s", cfg->seconds,
	       spin ? spin : "unset (library default)");
	if (pp)
		printf("%-10s %10s %10s %10s %12s %8s %8s\n", "transport",
		       "rtt_us", "min", "max", "msgs/s", "vs_tcp", "vs_unix");
	else
		printf("%-10s %10s %10s %10s %8s %8s\n", "transport",
		       "GB/s", "min", "max", "vs_tcp", "vs_unix");
	for (int i = 0; i < n; i++) {
		const struct tally *t = &tl[i];

		printf("%-10s", t->t->name);
		print_num(t->med);
		print_num(t->min);
		print_num(t->max);
		if (pp)
			printf(" %12.0f", t->mps_med);
		print_ratio(ratio(t, tcp));
		print_ratio(ratio(t, ux));
		putchar('\n');
	}
	printf("medians over reps; min/max: spread across reps; vs_*: %s\n",
	       pp ? "rtt ratio, lower is faster" : "throughput ratio, higher is faster");
	if (pp && find(tl, n, "shm"))
		puts("shm: bare cache-line ping-pong, no payload (size ignored)");
	if (pp && find(tl, n, "futex"))
		puts("futex: the same with a futex wake per message and sleeping receivers");
}

int sc__perf_main(int argc, char **argv)
{
	const struct transport *sel[NR_TRANSPORTS];
	struct cfg cfg = { .seconds = 0.5, .reps = 5 };
	struct tally tl[NR_TRANSPORTS] = { { 0 } };
	struct shared *sh;
	char *list = NULL;
	const char *spin;
	bool have_size = false, need_sc = false;
	unsigned long ul;
	unsigned run = 0;
	int n = 0, status = 0;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return usage(stdout, 0);
	if (argc < 2)
		return bad("missing mode");
	if (!strcmp(argv[1], "devmem"))
		return sc__perf_devmem_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "pingpong"))
		cfg.mode = PINGPONG;
	else if (!strcmp(argv[1], "stream"))
		cfg.mode = STREAM;
	else
		return bad("unknown mode '%s'", argv[1]);

	for (int i = 2; i < argc; i++) {
		char *opt = argv[i], *val = NULL;
		char *eq = strchr(argv[i], '=');
		bool takes;

		if (!strcmp(opt, "-h") || !strcmp(opt, "--help"))
			return usage(stdout, 0);
		if (!strcmp(opt, "--json")) {
			cfg.json = true;
			continue;
		}
		if (eq && !strncmp(opt, "--", 2)) {	/* --opt=value */
			*eq = '\0';
			val = eq + 1;
		}
		takes = !strcmp(opt, "--size") || !strcmp(opt, "--seconds") ||
			!strcmp(opt, "--spin-us") || !strcmp(opt, "--reps") ||
			!strcmp(opt, "--transports");
		if (!takes)
			return bad("unknown option '%s'", opt);
		if (!val && ++i >= argc)
			return bad("%s needs a value", opt);
		if (!val)
			val = argv[i];

		if (!strcmp(opt, "--size")) {
			if (parse_size(val, &cfg.size))
				return bad("--size: '%s' is not 1..64M bytes", val);
			have_size = true;
		} else if (!strcmp(opt, "--seconds")) {
			char *end;

			cfg.seconds = strtod(val, &end);
			if (end == val || *end || !(cfg.seconds > 0) ||
			    cfg.seconds > MAX_SECONDS)
				return bad("--seconds: '%s' is not a duration in (0, 3600]", val);
		} else if (!strcmp(opt, "--spin-us")) {
			if (parse_uint(val, 10000000, &ul))
				return bad("--spin-us: '%s' is not a count of microseconds", val);
			/* before any library call: it reads this once, on first use */
			if (setenv("SHORTCUT_SPIN_US", val, 1)) {
				sc__perf_err("setenv: %s", strerror(errno));
				return 1;
			}
		} else if (!strcmp(opt, "--reps")) {
			if (parse_uint(val, MAX_REPS, &ul) || ul == 0)
				return bad("--reps: '%s' is not 1..%d", val, MAX_REPS);
			cfg.reps = (int)ul;
		} else {
			list = val;
		}
	}
	if (!have_size)
		return bad("--size is required");

	if (list) {
		n = parse_transports(list, cfg.mode, sel);
		if (n < 0)
			return 2;
	} else {
		for (size_t i = 0; i < NR_TRANSPORTS; i++)
			if (transports[i].modes & (1u << cfg.mode))
				sel[n++] = &transports[i];
	}
	for (int i = 0; i < n; i++)
		need_sc |= sel[i]->ops == &sc__perf_sc_ops;
	/* a bad SHORTCUT_* variable is a usage error, not n failed children */
	if (need_sc && sc_config_check())
		return 2;
	spin = getenv("SHORTCUT_SPIN_US");

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		sc__perf_err("mmap: %s", strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		tl[i].t = sel[i];
		tl[i].v = calloc((size_t)cfg.reps, sizeof(double));
		tl[i].mps = calloc((size_t)cfg.reps, sizeof(double));
		if (!tl[i].v || !tl[i].mps) {
			sc__perf_err("malloc: %s", strerror(ENOMEM));
			status = 1;
			goto out;
		}
	}

	/* round robin: each rep visits every transport once */
	for (int r = 0; r < cfg.reps; r++) {
		for (int i = 0; i < n; i++) {
			struct run_result res = { 0 };
			double ns;

			if (sel[i]->ops ? run_pair(sel[i]->ops, &cfg, sh, run++, &res)
					: run_memcpy(&cfg, &res)) {
				sc__perf_err("%s: failed in rep %d of %d", sel[i]->name, r + 1, cfg.reps);
				status = 1;
				goto out;
			}
			ns = res.ns ? (double)res.ns : 1;
			if (cfg.mode == PINGPONG) {
				tl[i].v[r] = ns / 1e3 / (double)res.iters;
				tl[i].mps[r] = (double)res.iters * 1e9 / ns;
			} else {
				tl[i].v[r] = (double)res.bytes / ns;	/* bytes/ns = GB/s */
			}
		}
	}
	for (int i = 0; i < n; i++)
		summarize(&tl[i], cfg.reps);
	if (cfg.json)
		print_json(&cfg, tl, n, spin);
	else
		print_table(&cfg, tl, n, spin);
	if (fflush(stdout)) {
		sc__perf_err("stdout: %s", strerror(errno));
		status = 1;
	}
out:
	for (int i = 0; i < n; i++) {
		free(tl[i].v);
		free(tl[i].mps);
	}
	munmap(sh, sizeof(*sh));
	return status;
}
