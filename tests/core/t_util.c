/* SPDX-License-Identifier: MIT */
#include "t_util.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- scenarios ------------------------------------------------------- */

static const char *t_prog = "test";     /* the program's base name */
static const char *t_cur;               /* the scenario running, or NULL */
static pid_t t_main_pid;                /* the process running them */
static uint64_t t_seed_v;               /* t_seed's, once t_seed_have */
static int t_seed_have;

static void t_usage(FILE *f, const struct t_test *tests)
{
	fprintf(f, "usage: %s [--list | SCENARIO...]  (none: all, in order)\n"
		"scenarios:", t_prog);
	for (const struct t_test *t = tests; t->name; t++)
		fprintf(f, " %s", t->name);
	fputc('\n', f);
}

int t_main(int argc, char **argv, void (*setup)(void), const struct t_test *tests)
{
	const struct t_test **run;
	size_t n = 0, nrun = 0;

	if (argc > 0 && argv[0] && *argv[0]) {
		const char *slash = strrchr(argv[0], '/');

		t_prog = slash ? slash + 1 : argv[0];
	}
	while (tests[n].name)
		n++;
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", tests[i].name);
		return 0;
	}
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		t_usage(stdout, tests);
		return 0;
	}
	run = calloc(n + (size_t)(argc > 1 ? argc : 1), sizeof *run);
	if (!run)
		T_FAIL("out of memory");
	for (int i = 1; i < argc; i++) {
		size_t k;

		for (k = 0; k < n; k++)
			if (!strcmp(argv[i], tests[k].name))
				break;
		if (k == n) {
			if (argv[i][0] == '-')
				fprintf(stderr, "%s: unknown option '%s'\n", t_prog, argv[i]);
			else
				fprintf(stderr, "%s: no scenario named '%s'\n", t_prog, argv[i]);
			t_usage(stderr, tests);
			return 2;
		}
		run[nrun++] = &tests[k];
	}
	if (argc < 2)
		for (size_t i = 0; i < n; i++)
			run[nrun++] = &tests[i];

	t_main_pid = getpid();
	if (setup)
		setup();
	for (size_t i = 0; i < nrun; i++) {
		uint64_t t0 = t_now_ms();

		t_cur = run[i]->name;
		t_log("scenario %s", t_cur);
		run[i]->fn();
		t_log("scenario %s: ok (%llu ms)", t_cur,
		      (unsigned long long)(t_now_ms() - t0));
	}
	t_cur = NULL;
	free(run);
	return 0;
}

/* ---- assertions ------------------------------------------------------ */

void t_fail_(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, "[%d] %s:%d: FAIL: %s\n", (int)getpid(), file, line, msg);
	if (t_cur && getpid() == t_main_pid) {
		char seed[48] = "";
		const char *san = t_sanitizer();

		if (t_seed_have)
			snprintf(seed, sizeof seed, "SC_TEST_SEED=0x%llx ",
				 (unsigned long long)t_seed_v);
		fprintf(stderr, "[%d] scenario %s failed; alone: %smake check T=%s:%s%s%s\n",
			(int)getpid(), t_cur, seed, t_prog, t_cur, san ? " SAN=" : "",
			san ? san : "");
	}
	fflush(NULL);
	/* _exit: other threads may still be inside the library. */
	_exit(1);
}

const char *t_errname_(long long v)
{
	static __thread char bufs[4][96];
	static __thread int next;
	char *b;

	if (v >= 0 || v < -4095)
		return "";
	b = bufs[next++ & 3];
	snprintf(b, sizeof bufs[0], " (-%s: %s)", strerrorname_np((int)-v) ?
		 strerrorname_np((int)-v) : "?", strerror((int)-v));
	return b;
}

void t_log(const char *fmt, ...)
{
	va_list ap;

	printf("[%d] ", (int)getpid());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void t_skip(const char *msg)
{
	printf("SKIP: %s\n", msg);
	fflush(NULL);
	exit(77);
}

/* ---- PRNG and pattern ------------------------------------------------- */

uint64_t t_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void t_rng_seed(struct t_rng *r, uint64_t seed)
{
	r->s = t_mix64(seed);
	if (r->s == 0)
		r->s = 0x2545f4914f6cdd1dull;
}

uint64_t t_rng_next(struct t_rng *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint64_t t_rng_below(struct t_rng *r, uint64_t n)
{
	if (n == 0)
		T_FAIL("t_rng_below(0)");
	return t_rng_next(r) % n;
}

uint64_t t_rng_range(struct t_rng *r, uint64_t lo, uint64_t hi)
{
	if (hi < lo)
		T_FAIL("t_rng_range(%llu, %llu)", (unsigned long long)lo,
		       (unsigned long long)hi);
	if (hi - lo == UINT64_MAX)
		return t_rng_next(r);
	return lo + t_rng_below(r, hi - lo + 1);
}

void t_shuffle(struct t_rng *r, int *v, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = t_rng_below(r, i);
		int t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

uint64_t t_seed(void)
{
	const char *e;

	if (t_seed_have)
		return t_seed_v;
	e = getenv("SC_TEST_SEED");
	if (e && *e)
		t_seed_v = strtoull(e, NULL, 0);
	else
		t_seed_v = t_mix64(t_now_us() ^ ((uint64_t)getpid() << 32));
	t_seed_have = 1;
	printf("seed: SC_TEST_SEED=0x%llx\n", (unsigned long long)t_seed_v);
	fflush(stdout);
	return t_seed_v;
}

#define T_PAT_K 0xd6e8feb86659fd93ull

static inline uint64_t pat_word(uint64_t seed, uint64_t w)
{
	return t_mix64(seed + w * T_PAT_K);
}

uint8_t t_pat_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(pat_word(seed, off >> 3) >> ((off & 7) * 8));
}

void t_pat_fill(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len && (off & 7)) {
		*p++ = t_pat_byte(seed, off++);
		len--;
	}
	while (len >= 8) {
		uint64_t v = pat_word(seed, off >> 3);   /* little-endian host */
		memcpy(p, &v, 8);
		p += 8;
		off += 8;
		len -= 8;
	}
	while (len) {
		*p++ = t_pat_byte(seed, off++);
		len--;
	}
}

ssize_t t_pat_find_bad(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i = 0;

	while (i < len && ((off + i) & 7)) {
		if (p[i] != t_pat_byte(seed, off + i))
			return (ssize_t)i;
		i++;
	}
	while (len - i >= 8) {
		uint64_t v = pat_word(seed, (off + i) >> 3), got;

		memcpy(&got, p + i, 8);
		if (got != v)
			break;
		i += 8;
	}
	for (; i < len; i++)
		if (p[i] != t_pat_byte(seed, off + i))
			return (ssize_t)i;
	return -1;
}

void t_pat_check_(const char *file, int line, uint64_t seed, uint64_t off,
		  const void *buf, size_t len)
{
	const uint8_t *p = buf;
	ssize_t bad = t_pat_find_bad(seed, off, buf, len);
	size_t nbad = 0, i;

	if (bad < 0)
		return;
	for (i = (size_t)bad; i < len; i++)
		nbad += p[i] != t_pat_byte(seed, off + i);
	/* Where does the byte we got belong?  Search nearby offsets. */
	long long found = 0;
	int have = 0;
	for (long long d = -65536; d <= 65536 && !have; d++) {
		long long o = (long long)(off + (size_t)bad) + d;
		size_t k, m = len - (size_t)bad < 16 ? len - (size_t)bad : 16;

		if (o < 0 || d == 0)
			continue;
		for (k = 0; k < m; k++)
			if (p[(size_t)bad + k] != t_pat_byte(seed, (uint64_t)o + k))
				break;
		if (k == m && m >= 4) {
			found = d;
			have = 1;
		}
	}
	char where[96];

	if (have)
		snprintf(where, sizeof where, "; the bytes found there belong at "
			 "stream offset %+lld from it", found);
	else
		snprintf(where, sizeof where, "; they match no stream offset "
			 "within 64 KiB");
	t_fail_(file, line, "stream data mismatch at stream offset %llu (buffer "
		"index %zd of %zu, chunk starts at offset %llu): got 0x%02x, "
		"expected 0x%02x; %zu bad bytes from there to the chunk end%s",
		(unsigned long long)(off + (size_t)bad), bad, len,
		(unsigned long long)off, p[bad], t_pat_byte(seed, off + (size_t)bad),
		nbad, where);
}

/* ---- processes --------------------------------------------------------- */

pid_t t_fork(int (*fn)(void *arg), void *arg)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		T_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		int rc;

		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
			T_FAIL("prctl: %s", strerror(errno));
		if (getppid() != parent)
			_exit(1);
		rc = fn(arg);
		fflush(NULL);
		exit(rc);
	}
	return pid;
}

pid_t t_ppid_of(pid_t pid)
{
	char p[64], buf[512], *rp;
	FILE *f;
	int ppid = -1;

	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof buf, f) && (rp = strrchr(buf, ')')) != NULL)
		if (sscanf(rp + 1, " %*c %d", &ppid) != 1)
			ppid = -1;
	fclose(f);
	return ppid;
}

char t_state_of(pid_t pid, pid_t tid)
{
	char p[64], buf[512], *rp;
	FILE *f;
	char st = '?';

	snprintf(p, sizeof p, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	f = fopen(p, "r");
	if (!f)
		return '?';
	if (fgets(buf, sizeof buf, f) && (rp = strrchr(buf, ')')) != NULL && rp[1] == ' ')
		st = rp[2];
	fclose(f);
	return st;
}

void t_wait_asleep(pid_t pid, pid_t tid, unsigned limit_ms, const char *what)
{
	uint64_t t0 = t_now_ms();
	char st;

	while ((st = t_state_of(pid, tid)) != 'S') {
		if (t_now_ms() - t0 > limit_ms)
			T_FAIL("%s: thread %d of process %d not asleep after %u ms (state %c)",
			       what, (int)tid, (int)pid, limit_ms, st);
		struct timespec ts = { 0, 500000 };

		nanosleep(&ts, NULL);
	}
}

const char *t_status_str(int status)
{
	static __thread char buf[96];

	if (WIFEXITED(status))
		snprintf(buf, sizeof buf, "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof buf, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, sizeof buf, "status 0x%x", status);
	return buf;
}

int t_wait_status(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			T_FAIL("waitpid(%d): %s", (int)pid, strerror(errno));
	return status;
}

void t_wait_ok(pid_t pid)
{
	int status = t_wait_status(pid);

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		T_FAIL("child %d %s", (int)pid, t_status_str(status));
}

void t_wait_both(pid_t a, const char *name_a, pid_t b, const char *name_b)
{
	int left = 2;

	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, 0);

		if (p < 0) {
			if (errno == EINTR)
				continue;
			T_FAIL("waitpid: %s", strerror(errno));
		}
		if (p != a && p != b)
			continue;
		left--;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			pid_t other = p == a ? b : a;

			if (left > 0) {
				kill(other, SIGKILL);
				t_wait_status(other);
			}
			T_FAIL("%s (pid %d) %s", p == a ? name_a : name_b, (int)p,
			       t_status_str(status));
		}
	}
}

struct pair_arg {
	const char *path;
	int (*fn)(const char *path, void *arg);
	void *arg;
};

static int pair_trampoline(void *p)
{
	struct pair_arg *pa = p;

	return pa->fn(pa->path, pa->arg);
}

void t_run_pair(const char *path, int (*server)(const char *path, void *arg),
		int (*client)(const char *path, void *arg), void *arg)
{
	struct pair_arg sa = { path, server, arg }, ca = { path, client, arg };
	pid_t s = t_fork(pair_trampoline, &sa);
	pid_t c = t_fork(pair_trampoline, &ca);

	t_wait_both(s, "server", c, "client");
}

void t_run_pair_64k(int to_client[2], int to_server[2],
		    int (*server)(const char *path, void *arg),
		    int (*client)(const char *path, void *arg))
{
	char path[T_PATH_MAX];

	T_EQ(pipe(to_client), 0);
	T_EQ(pipe(to_server), 0);
	setenv("SHORTCUT_RMEM", "65536", 1);
	setenv("SHORTCUT_WMEM", "65536", 1);
	t_run_pair(t_listen_path(path), server, client, NULL);
}

/* ---- library helpers ---------------------------------------------------- */

char *t_listen_path(char *buf)
{
	static int counter;

	snprintf(buf, T_PATH_MAX, "@sc-test-%d-%d", (int)getpid(), counter++);
	return buf;
}

struct sc_conn *t_connect_retry(const char *path, int flags, int timeout_ms)
{
	uint64_t end = t_now_ms() + (uint64_t)timeout_ms;
	struct sc_conn *c = NULL;

	for (;;) {
		int r = sc_connect(path, &c, flags);

		if (r == 0) {
			T_ASSERT(c != NULL);
			return c;
		}
		if (r != -ECONNREFUSED)
			T_FAIL("sc_connect(%s): %d%s", path, r, t_errname_(r));
		if (t_now_ms() > end)
			T_FAIL("sc_connect(%s): still refused after %d ms", path,
			       timeout_ms);
		t_sleep_ms(2);
	}
}

struct sc_conn *t_accept_one(const char *path, struct sc_listener **lp)
{
	struct sc_listener *l = NULL;
	struct sc_conn *c = NULL;

	T_OK(sc_listen(path, 0, &l));
	T_ASSERT(l != NULL);
	T_OK(sc_accept(l, &c, 0));
	T_ASSERT(c != NULL);
	*lp = l;
	return c;
}

void t_send_all(struct sc_conn *c, const void *buf, size_t len)
{
	ssize_t r = sc_send(c, buf, len, 0);

	if (r != (ssize_t)len)
		T_FAIL("sc_send(%zu) returned %zd%s", len, r, t_errname_(r));
}

void t_recv_all(struct sc_conn *c, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = sc_recv(c, (char *)buf + got, len - got, 0);

		if (r <= 0)
			T_FAIL("sc_recv after %zu of %zu bytes returned %zd%s", got,
			       len, r, t_errname_(r));
		got += (size_t)r;
	}
}

/* ---- system -------------------------------------------------------------- */

int t_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		T_FAIL("opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the directory's own fd */
}

void t_fd_dump(const char *why)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return;
	printf("[%d] open fds (%s):\n", (int)getpid(), why);
	while ((e = readdir(d)) != NULL) {
		char p[300], l[300];
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
		n = readlink(p, l, sizeof l - 1);
		l[n < 0 ? 0 : n] = 0;
		printf("  %s -> %s\n", e->d_name, l);
	}
	closedir(d);
	fflush(stdout);
}

int t_maps_count(const char *needle)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char *line = NULL;
	size_t cap = 0;
	int n = 0;

	if (!f)
		T_FAIL("fopen /proc/self/maps: %s", strerror(errno));
	while (getline(&line, &cap, f) > 0)
		if (strstr(line, needle))
			n++;
	free(line);
	fclose(f);
	return n;
}

void t_wait_fds_back(int fds0, int maps0, unsigned limit_ms, const char *why)
{
	uint64_t end = t_now_ms() + limit_ms;
	int fds, maps;

	for (;;) {
		fds = t_fd_count();
		maps = t_maps_count("memfd:");
		if ((fds == fds0 && maps == maps0) || t_now_ms() > end)
			break;
		t_sleep_ms(10);
	}
	if (fds != fds0)
		t_fd_dump(why);
	T_EQ(fds, fds0);
	T_EQ(maps, maps0);
}

uint64_t t_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t t_now_ms(void)
{
	return t_now_us() / 1000u;
}

void t_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

long t_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		T_FAIL("getrlimit: %s", strerror(errno));
	if (rl.rlim_cur != rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			T_FAIL("setrlimit: %s", strerror(errno));
	}
	return rl.rlim_max == RLIM_INFINITY ? (long)1 << 30 : (long)rl.rlim_max;
}

const char *t_sanitizer(void)
{
	const char *s = getenv("SC_TEST_SANITIZER");

	return s && *s ? s : NULL;
}

uint64_t t_scale(uint64_t normal, uint64_t under_san)
{
	return t_sanitizer() ? under_san : normal;
}

void t_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			T_FAIL("write(fd %d): %s", fd, n < 0 ? strerror(errno) : "0");
		p += n;
		len -= (size_t)n;
	}
}

void t_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			T_FAIL("read(fd %d): %s", fd, n < 0 ? strerror(errno) :
			       "unexpected EOF");
		p += n;
		len -= (size_t)n;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *t_shm_list(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char **names = NULL, *out;
	size_t n = 0, cap = 0, total = 1, i;

	if (!d)
		return strdup("");
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			names = realloc(names, cap * sizeof *names);
			T_ASSERT(names != NULL);
		}
		names[n] = strdup(e->d_name);
		T_ASSERT(names[n] != NULL);
		total += strlen(names[n]) + 1;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_str);
	out = malloc(total);
	T_ASSERT(out != NULL);
	out[0] = 0;
	for (i = 0; i < n; i++) {
		strcat(out, names[i]);
		strcat(out, "\n");
		free(names[i]);
	}
	free(names);
	return out;
}

/* ---- readiness of a connection ---- */

/* poll() one fd for POLLIN; returns the revents (0 on timeout). */
int t_poll_in(int fd, int timeout_ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	T_ASSERT(r >= 0);
	return r ? p.revents : 0;
}

/*
 * Wait via poll(sc_conn_fd) until sc_conn_events has all bits of want.
 * The fd may be readable spuriously ("something may have changed"): loop.
 * Fails if poll() times out (the fd never became readable although the
 * state was expected to change) or after limit_ms.  Returns the ms waited.
 */
uint64_t t_wait_events(struct sc_conn *c, int want, unsigned limit_ms, const char *what)
{
	uint64_t t0 = t_now_ms(), now;
	int fd = sc_conn_fd(c), ev = 0;

	T_ASSERTF(fd >= 0, "sc_conn_fd returned %d", fd);
	for (;;) {
		ev = sc_conn_events(c);
		if ((ev & want) == want)
			return t_now_ms() - t0;
		now = t_now_ms();
		if (now - t0 > limit_ms)
			T_FAIL("%s: events 0x%x lack 0x%x after %u ms", what, ev, want, limit_ms);
		if (t_poll_in(fd, (int)(limit_ms - (now - t0)) + 1) == 0) {
			ev = sc_conn_events(c);
			T_FAIL("%s: poll(sc_conn_fd) timed out after %llu ms without the fd "
			       "becoming readable; sc_conn_events now 0x%x (wanted 0x%x)%s",
			       what, (unsigned long long)(t_now_ms() - t0), ev, want,
			       (ev & want) == want ? ": the state changed but the fd "
			       "was never signalled" : "");
		}
	}
}
