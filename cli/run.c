/* SPDX-License-Identifier: MIT */
/*
 * shortcut run CMD...   run a program with the interposer preloaded
 * shortcut stats        counters of every process of the run directory
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <stdatomic.h>

#include "cli.h"
#include "rundir.h"
#include "shortcut.h"
#include "stats.h"

/* The library `shortcut run` preloads: libshortcut.so beside the binary
 * (the build tree), else the installed one, SC_LIBDIR_REL from the
 * binary's folder (PREFIX/bin/shortcut -> PREFIX/lib/libshortcut.so.0), so
 * that a prefix moved as a whole (an extracted package) still finds its
 * own.  0 and the path in out, or -ENOENT (-errno of /proc/self/exe). */
int sc__find_lib(char *out, size_t len)
{
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	if (snprintf(out, len, "%s/libshortcut.so", exe) < (int)len && access(out, R_OK) == 0)
		return 0;
	char rel[PATH_MAX], dir[PATH_MAX];
	if (snprintf(rel, sizeof(rel), "%s/%s", exe, SC_LIBDIR_REL) >= (int)sizeof(rel) ||
	    !realpath(rel, dir))
		return -ENOENT;
	if (snprintf(out, len, "%s/%s", dir, SC_SONAME) < (int)len && access(out, R_OK) == 0)
		return 0;
	return -ENOENT;
}

static int run_usage(FILE *f, int status)
{
	fputs("usage: shortcut run [-v|-vv|-vvv] [--off] [--] CMD [ARGS...]\n"
	      "  -v, -vv, -vvv  log each connection's outcome (SHORTCUT_LOG=1, 2, 3) to stderr\n"
	      "  --off          leave every connection on TCP (SHORTCUT_DISABLE=1)\n", f);
	return status;
}

int sc__run_main(int argc, char **argv)
{
	char lib[PATH_MAX], pre[2 * PATH_MAX + 2];
	int i = 1;

	/* our options come before the command; the command's are its own */
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			return run_usage(stdout, 0);
		} else if (!strcmp(a, "--off")) {
			setenv("SHORTCUT_DISABLE", "1", 1);
		} else if (!strcmp(a, "-v") || !strcmp(a, "-vv") || !strcmp(a, "-vvv")) {
			char lv[2] = { (char)('0' + (int)strlen(a) - 1), 0 };
			setenv("SHORTCUT_LOG", lv, 1);
		} else {
			fprintf(stderr, "shortcut run: unknown option %s\n", a);
			return run_usage(stderr, 2);
		}
	}
	if (i >= argc)
		return run_usage(stderr, 2);
	if (sc_config_check())
		return 2;
	if (sc__find_lib(lib, sizeof(lib))) {
		fprintf(stderr, "shortcut: %s not found beside the shortcut binary nor in %s from "
			"it; reinstall (make install, or the package)\n", SC_SONAME, SC_LIBDIR_REL);
		return 1;
	}
	/* a program the loader will not preload into runs, but not silently */
	struct sc_target t;
	if (sc__target_check(argv[i], &t) == 0)
		for (int k = 0; k < t.n; k++)
			fprintf(stderr, "shortcut: warning: %s: %s\n", t.path, t.f[k].what);
	const char *old = getenv("LD_PRELOAD");
	if (old && *old)
		snprintf(pre, sizeof(pre), "%s:%s", lib, old);
	else
		snprintf(pre, sizeof(pre), "%s", lib);
	setenv("LD_PRELOAD", pre, 1);
	execvp(argv[i], argv + i);
	fprintf(stderr, "shortcut: cannot run %s: %s\n", argv[i], strerror(errno));
	return 127;
}

/* f's process is alive: its pid, and the same process (not a later one
 * given its pid: the start time recorded in the file). */
static bool alive(const struct sc_stats_file *f)
{
	return sc__pid_alive_since(f->pid, f->version == SC_STATS_VERSION ? f->start : 0);
}

static const char *addr_str(const struct sc_addr16 *a, uint16_t port, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };
	if (!memcmp(a->b, pre, 12)) {
		inet_ntop(AF_INET, &a->b[12], ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, port);
	} else {
		inet_ntop(AF_INET6, a->b, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, port);
	}
	return buf;
}

/* shortcut stat: the live connections of every running process (smcss). */
/* Call fn for the stats file of every live process in the run directory. */
static void each_live_file(DIR *d, void (*fn)(const struct sc_stats_file *, void *), void *arg)
{
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stats-", 6))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != sizeof(struct sc_stats_file)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (f == MAP_FAILED)
			continue;
		if (f->magic == SC_STATS_MAGIC && f->version == SC_STATS_VERSION && alive(f))
			fn(f, arg);
		munmap(f, sizeof(*f));
	}
}

struct stat_ctx {
	bool json;
	int n;
};

/* `shortcut stat`: one line per live connection record of f. */
static void stat_file(const struct sc_stats_file *f, void *arg)
{
	static const char *const modes[] = { "-", "tcp", "pending", "shm" };
	struct stat_ctx *x = arg;
	for (uint32_t i = 0, n = sc__stats_nrecs(f); i < n; i++) {
		const struct sc_conn_rec *r = &f->recs[i];
		uint32_t m = atomic_load_explicit(&r->mode, memory_order_acquire);
		if (m == SC_REC_FREE || m > SC_REC_SHM)
			continue;
		char la[64], pa[64], why[40];
		addr_str(&r->laddr, r->lport, la, sizeof(la));
		addr_str(&r->paddr, r->pport, pa, sizeof(pa));
		if (m == SC_REC_SHM)
			snprintf(why, sizeof(why), "%d", r->peer_pid);
		else if (r->reason && r->reason <= SC_FB_MAX && sc__fallback_names[r->reason - 1])
			snprintf(why, sizeof(why), "%s", sc__fallback_names[r->reason - 1]);
		else
			snprintf(why, sizeof(why), "-");
		unsigned long long tx = atomic_load_explicit(&r->bytes_sent, memory_order_relaxed);
		unsigned long long rx = atomic_load_explicit(&r->bytes_received, memory_order_relaxed);
		/* the name is the process's to choose (prctl): a copy,
		 * terminated, printed escaped */
		char comm[sizeof(f->comm)];
		memcpy(comm, f->comm, sizeof(comm));
		comm[sizeof(comm) - 1] = 0;
		if (x->json) {
			printf("%s{\"pid\": %d, \"command\": ", x->n ? ", " : "", f->pid);
			sc__json_str(comm);
			printf(", \"fd\": %d, \"mode\": \"%s\", "
			       "\"local\": \"%s\", \"peer\": \"%s\", \"peer_pid\": %d, "
			       "\"fallback\": \"%s\", \"bytes_sent\": %llu, \"bytes_received\": %llu}",
			       r->fd, modes[m], la, pa, m == SC_REC_SHM ? r->peer_pid : 0,
			       m == SC_REC_TCP ? why : "", tx, rx);
		} else {
			for (char *p = comm; *p; p++)
				if ((unsigned char)*p < 0x20 || *p == 0x7f)
					*p = '?';
			printf("%-8d %-15.15s %5d %-8s %-24s %-24s %-22s %12llu %12llu\n", f->pid,
			       comm, r->fd, modes[m], la, pa, why, tx, rx);
		}
		x->n++;
	}
}

/* Live connections on shared memory (records in mode shm). */
static void count_shm(const struct sc_stats_file *f, void *arg)
{
	for (uint32_t i = 0, n = sc__stats_nrecs(f); i < n; i++)
		if (atomic_load_explicit(&f->recs[i].mode, memory_order_acquire) == SC_REC_SHM)
			++*(int *)arg;
}

/* `shortcut off [--wait S]` / `shortcut on`: the run directory's kill
 * switch.  Processes watch for the file (their switch thread): while it
 * exists, new connections stay on TCP and live ones switch back. */
int sc__off_main(int argc, char **argv, bool off)
{
	double wait_s = 5;
	if (off && argc == 3 && !strcmp(argv[1], "--wait")) {
		char *end;
		wait_s = strtod(argv[2], &end);
		if (*end || wait_s < 0 || wait_s > 3600) {
			fprintf(stderr, "shortcut off: --wait takes seconds, 0 to 3600 (got '%s')\n",
				argv[2]);
			return 2;
		}
	} else if (argc != 1) {
		fprintf(stderr, "usage: shortcut %s\n", off ? "off [--wait SECONDS]" : "on");
		return 2;
	}
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	if (!dir) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, SC_OFF_FILE);
	if (!off) {
		if (unlink(path) < 0 && errno != ENOENT) {
			fprintf(stderr, "shortcut on: %s: %s\n", path, strerror(errno));
			return 1;
		}
		printf("acceleration on (new connections)\n");
		return 0;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		fprintf(stderr, "shortcut off: %s: %s\n", path, strerror(errno));
		return 1;
	}
	close(fd);
	/* the processes switch their connections: wait until none is left */
	int left = 0;
	for (double t = 0;; t += 0.05) {
		DIR *d = opendir(dir);
		left = 0;
		if (d) {
			each_live_file(d, count_shm, &left);
			closedir(d);
		}
		if (!left || t >= wait_s)
			break;
		usleep(50000);
	}
	if (left) {
		printf("acceleration off; %d connections still on shared memory\n", left);
		return 1;
	}
	printf("acceleration off: every connection is on TCP\n");
	return 0;
}

int sc__stat_main(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: shortcut stat [--json]\n");
		return 2;
	}
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
	struct stat_ctx ctx = { .json = json };
	if (json)
		printf("[");
	else
		printf("%-8s %-15s %5s %-8s %-24s %-24s %-22s %12s %12s\n", "PID", "COMMAND", "FD",
		       "MODE", "LOCAL", "PEER", "PEER PID / REASON", "SENT", "RECEIVED");
	each_live_file(d, stat_file, &ctx);
	closedir(d);
	if (json)
		printf("]\n");
	return 0;
}

int sc__stats_main(int argc, char **argv)
{
	bool json = false, reset = false, prom = false;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--prometheus"))
			prom = true;
		else if (!strcmp(argv[i], "--reset"))
			reset = true;
		else {
			fprintf(stderr, "shortcut stats: unknown option '%s' (options: --json, "
				"--prometheus, --reset)\n"
				"usage: shortcut stats [--json | --prometheus] [--reset]\n", argv[i]);
			return 2;
		}
	}
	if (json + prom + reset > 1) {
		fprintf(stderr, "shortcut stats: --json, --prometheus and --reset exclude each other\n"
			"usage: shortcut stats [--json | --prometheus | --reset]\n");
		return 2;
	}
	if (sc_config_check())
		return 2;
	const char *dir = sc__rundir();
	if (!dir) {
		fprintf(stderr, "shortcut: run directory unusable: %s\n", sc__rundir_error());
		return 1;
	}
	/* the files of dead processes go into stats-retired first */
	sc__stats_collect(true);
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "shortcut: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	uint64_t sum[sizeof(struct sc_counters) / 8] = { 0 };
	int procs = 0, live = 0;
	/* the retired counters and the live files, read under the lock a
	 * collection takes (a file is in one or the other) */
	int lfd = openat(dirfd(d), SC_RETIRED_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (lfd >= 0)
		flock(lfd, reset ? LOCK_EX : LOCK_SH);
	struct sc_stats_retired *ret = sc__stats_retired(NULL);
	if (ret) {
		_Atomic uint64_t *c = (_Atomic uint64_t *)&ret->c;
		for (size_t i = 0; i < sizeof(sum) / 8; i++) {
			sum[i] += reset ? 0 : atomic_load_explicit(&c[i], memory_order_relaxed);
			if (reset)
				atomic_store(&c[i], 0);
		}
		procs += reset ? 0 : (int)ret->processes;
		if (reset)
			ret->processes = 0;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stats-", 6))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size != sizeof(struct sc_stats_file)) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
					       MAP_SHARED, fd, 0);
		close(fd);
		if (f == MAP_FAILED)
			continue;
		if (__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) == SC_STATS_MAGIC) {
			_Atomic uint64_t *c = (_Atomic uint64_t *)&f->c;
			bool up = alive(f);
			procs++;
			live += up;
			for (size_t i = 0; i < sizeof(sum) / 8; i++)
				sum[i] += reset ? 0 : atomic_load_explicit(&c[i], memory_order_relaxed);
			/* shared-memory connections still open (or never closed:
			 * the process exited without close()) count from their
			 * records; closed ones were folded into the counters */
			for (uint32_t i = 0, n = sc__stats_nrecs(f);
			     i < n && !reset && f->version == SC_STATS_VERSION; i++) {
				const struct sc_conn_rec *r = &f->recs[i];
				if (atomic_load_explicit(&r->mode, memory_order_acquire) != SC_REC_SHM)
					continue;
				sum[offsetof(struct sc_counters, bytes_sent) / 8] +=
					atomic_load_explicit(&r->bytes_sent, memory_order_relaxed);
				sum[offsetof(struct sc_counters, bytes_received) / 8] +=
					atomic_load_explicit(&r->bytes_received, memory_order_relaxed);
			}
			if (reset) {
				if (up)
					for (size_t i = 0; i < sizeof(sum) / 8; i++)
						atomic_store(&c[i], 0);
				else
					unlinkat(dirfd(d), e->d_name, 0);
			}
		}
		munmap(f, sizeof(*f));
	}
	if (lfd >= 0)
		close(lfd);
	closedir(d);
	struct sc_counters *s = (struct sc_counters *)sum;
#define V(f) ((unsigned long long)*(uint64_t *)&s->f)
	if (reset) {
		printf("counters reset (%d processes)\n", procs);
		return 0;
	}
	if (prom)
		return sc__stats_prometheus(dir, procs, live, s);
	if (json) {
		printf("{\"rundir\": ");
		sc__json_str(dir);
		printf(", \"processes\": %d, \"live_processes\": %d, "
		       "\"conns_accelerated\": %llu, \"conns_fallback\": %llu, "
		       "\"conns_switched_to_tcp\": %llu, \"fallback\": {",
		       procs, live, V(conns_accelerated), V(conns_fallback),
		       V(fallback[SC_FB_SWITCHED]));
		for (int i = 0, first = 1; i < SC_FB_MAX; i++) {
			if (!sc__fallback_names[i] || i == SC_FB_SWITCHED)
				continue;
			printf("%s\"%s\": %llu", first ? "" : ", ", sc__fallback_names[i],
			       V(fallback[i]));
			first = 0;
		}
		printf("}, \"bytes_shm_sent\": %llu, \"bytes_shm_received\": %llu, "
		       "\"bytes_tcp_sent\": %llu, \"bytes_tcp_received\": %llu, "
		       "\"conns_opened\": %llu, \"conns_closed\": %llu, \"conns_aborted\": %llu, "
		       "\"conns_refused\": %llu, \"proto_errors\": %llu, \"groups_created\": %llu, "
		       "\"groups_joined\": %llu, \"wakeups_sent\": %llu, \"sleeps\": %llu, "
		       "\"spin_hits\": %llu, \"spins_crowded\": %llu, \"devmem\": {\"bindings\": %llu, "
		       "\"bytes_into_regions\": %llu, \"frags_delivered\": %llu, "
		       "\"frags_outstanding\": %llu, \"waits\": %llu}}\n",
		       V(bytes_sent), V(bytes_received), V(bytes_tcp_sent), V(bytes_tcp_received),
		       V(conns_opened), V(conns_closed), V(conns_aborted), V(conns_refused),
		       V(proto_errors), V(groups_created), V(groups_joined), V(wakeups_sent),
		       V(sleeps), V(spin_hits), V(spins_crowded), V(dm_bindings), V(dm_bytes_in), V(dm_frags),
		       V(dm_frags_out), V(dm_waits));
		return 0;
	}
	printf("run directory       %s\n", dir);
	printf("processes           %d (%d running)\n", procs, live);
	printf("connections         %llu on shared memory, %llu on TCP\n",
	       V(conns_accelerated), V(conns_fallback));
	for (int i = 0; i < SC_FB_MAX; i++)
		if (sc__fallback_names[i] && V(fallback[i]) && i != SC_FB_SWITCHED)
			printf("  stayed on TCP     %-22s %llu\n", sc__fallback_names[i], V(fallback[i]));
	if (V(fallback[SC_FB_SWITCHED]))
		printf("  later switched back to TCP (exec, SCM_RIGHTS, off) %llu\n",
		       V(fallback[SC_FB_SWITCHED]));
	printf("bytes, shared memory  sent %llu, received %llu\n",
	       V(bytes_sent), V(bytes_received));
	printf("bytes, TCP            sent %llu, received %llu\n",
	       V(bytes_tcp_sent), V(bytes_tcp_received));
	if (V(dm_bindings) || V(dm_frags) || V(dm_bytes_in))
		printf("device memory       %llu bindings, %llu bytes into regions, %llu fragments "
		       "(%llu outstanding), %llu waits for a free chunk\n", V(dm_bindings),
		       V(dm_bytes_in), V(dm_frags), V(dm_frags_out), V(dm_waits));
	printf("aborted %llu, refused %llu, protocol errors %llu, link groups %llu+%llu, "
	       "wake-ups %llu, sleeps %llu (%llu without spinning: machine crowded)\n",
	       V(conns_aborted), V(conns_refused), V(proto_errors), V(groups_created),
	       V(groups_joined), V(wakeups_sent), V(sleeps), V(spins_crowded));
	return 0;
}
