/* SPDX-License-Identifier: MIT */
/*
 * Stats files: each process's counters and connection records in the
 * run directory, where `shortcut stats` and `shortcut stat` read them; the
 * files of dead processes folded into stats-retired.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rundir.h"
#include "stats.h"
#include "sys.h"
#include "forkreset.h"

static struct sc_stats_file *_Atomic stats_file;
/* records below this index are taken (a hint: lowered by each put) */
static _Atomic uint32_t rec_low;
/* records below this index have their pages allocated (sc__backed) */
static _Atomic uint32_t rec_backed;

/* Record i's pages allocated before it is first looked at: 0, or -ENOSPC
 * (a full run directory: the connection goes without a record). */
static int rec_back(struct sc_stats_file *f, uint32_t i)
{
	if (i < atomic_load_explicit(&rec_backed, memory_order_relaxed))
		return 0;
	if (sc__backed(&f->recs[i], sizeof(f->recs[i])) < 0)
		return -ENOSPC;
	/* every record that ends on the pages just allocated */
	uintptr_t pg = (uintptr_t)getpagesize();
	uintptr_t end = ((uintptr_t)&f->recs[i + 1] + pg - 1) & ~(pg - 1);
	uint32_t n = (uint32_t)((end - (uintptr_t)f->recs) / sizeof(f->recs[0]));
	atomic_store_explicit(&rec_backed, n < SC_STAT_RECS ? n : SC_STAT_RECS,
			      memory_order_relaxed);
	return 0;
}

static int stats_open(bool child);

/* A fork child's own file, not made yet (sc__stats_file_child) */
static _Atomic bool child_owes;
static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER; /* order: docs/interposer.md §6b */
SC_LOCK_RANK(child_lock, LO_CHILD)
/* guards mapping the retired counts once; order: docs/interposer.md §6b */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(retired_lock, LO_RETIRED)

void sc__stats_file_child(void)
{
	/* a grandchild forked before its parent made its own file owes one
	 * too (child_owes came along) */
	/* (relaxed: the fork child's only thread) */
	if (atomic_exchange_explicit(&stats_file, NULL, memory_order_relaxed))
		atomic_store_explicit(&child_owes, true, memory_order_relaxed);
	sc__mutex_reset(&child_lock);
	/* (a thread of the parent's may have held it) */
	sc__mutex_reset(&retired_lock);
}

bool sc__stats_owed(void)
{
	/* (relaxed: child_owes is the child's own, set before it runs code
	 * of the program's) */
	return atomic_load_explicit(&child_owes, memory_order_relaxed) &&
	       !atomic_load_explicit(&stats_file, memory_order_acquire);
}

static struct sc_stats_file *child_file(void)
{
	pthread_mutex_lock(&child_lock);
	/* (relaxed: changed under child_lock, which we hold; the file is
	 * published by stats_file's own release) */
	if (atomic_load_explicit(&child_owes, memory_order_relaxed)) {
		/* made once: a failure leaves the child counting into its
		 * parent's file, without records (as a full run directory) */
		(void)stats_open(true);
		atomic_store_explicit(&child_owes, false, memory_order_relaxed);
	}
	pthread_mutex_unlock(&child_lock);
	return atomic_load_explicit(&stats_file, memory_order_acquire);
}

struct sc_conn_rec *sc__rec_get(void)
{
	struct sc_stats_file *f = atomic_load_explicit(&stats_file, memory_order_acquire);
	if (!f && atomic_load_explicit(&child_owes, memory_order_relaxed))
		f = child_file();
	if (!f)
		return NULL;
	for (uint32_t i = atomic_load_explicit(&rec_low, memory_order_relaxed); i < SC_STAT_RECS; i++) {
		struct sc_conn_rec *r = &f->recs[i];
		uint32_t z = SC_REC_FREE;
		if (rec_back(f, i) < 0)
			return NULL;
		if (atomic_load_explicit(&r->mode, memory_order_relaxed) == SC_REC_FREE &&
		    /* seq_cst (kept; acquire would do: the previous use's
		     * release in sc__rec_put) */
		    atomic_compare_exchange_strong_explicit(&r->mode, &z, SC_REC_TCP,
							    memory_order_seq_cst,
							    memory_order_relaxed)) {
			/* readers look up to nrecs (a record not yet counted
			 * there is simply not listed yet) */
			uint32_t n = atomic_load_explicit(&f->nrecs, memory_order_relaxed);
			/* seq_cst (kept; release would do): pairs with the
			 * acquire in sc__stats_recs (rundir.h) */
			while (n < i + 1 &&
			       !atomic_compare_exchange_weak_explicit(&f->nrecs, &n, i + 1,
								      memory_order_seq_cst,
								      memory_order_relaxed))
				;
			/* (relaxed: rec_low is where a search starts, a hint;
			 * the compare-exchange on mode decides) */
			uint32_t lo = i;
			atomic_compare_exchange_strong_explicit(&rec_low, &lo, i + 1,
								memory_order_relaxed,
								memory_order_relaxed);
			atomic_store_explicit(&r->bytes_sent, 0, memory_order_relaxed);
			atomic_store_explicit(&r->bytes_received, 0, memory_order_relaxed);
			__atomic_store_n(&r->reason, 0, __ATOMIC_RELAXED);
			r->peer_pid = 0;
			r->peer_ident = 0;
			r->fd = -1;
			r->lport = r->pport = 0;        /* a recycled record: filled anew */
			memset(&r->laddr, 0, sizeof(r->laddr));
			memset(&r->paddr, 0, sizeof(r->paddr));
			return r;
		}
	}
	return NULL;
}

void sc__rec_put(struct sc_conn_rec *r)
{
	struct sc_stats_file *f = atomic_load_explicit(&stats_file, memory_order_acquire);
	if (!r)
		return;
	bool tcp = sc__rec_tcp_only(r);
	uint64_t tx = atomic_load_explicit(&r->bytes_sent, memory_order_relaxed);
	uint64_t rx = atomic_load_explicit(&r->bytes_received, memory_order_relaxed);
	atomic_store_explicit(&r->mode, SC_REC_FREE, memory_order_release);
	if (tcp) {      /* (after: a reader counts them once at most) */
		SC_STAT_ADD(bytes_tcp_sent, tx);
		SC_STAT_ADD(bytes_tcp_received, rx);
	}
	if (f && r >= f->recs && r < f->recs + SC_STAT_RECS) {
		/* (relaxed: a hint, as in sc__rec_get) */
		uint32_t i = (uint32_t)(r - f->recs);
		uint32_t lo = atomic_load_explicit(&rec_low, memory_order_relaxed);
		while (i < lo && !atomic_compare_exchange_weak_explicit(&rec_low, &lo, i,
									memory_order_relaxed,
									memory_order_relaxed))
			;
	}
}

int sc__stats_file_open(void)
{
	return stats_open(false);
}

static int stats_open(bool child)
{
	const char *d = sc__rundir();
	char path[320];
	int fd, saved = errno;

	if (!d)
		return -ENOENT;
	uint64_t id = sc__self();
	if (!id)
		return -ENOSPC;
	snprintf(path, sizeof(path), "%s/stats-%014llx", d, (unsigned long long)id);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, sc__rundir_file_mode());
	if (fd >= 0)
		sc__rundir_file_made(fd);
	if (fd < 0 || ftruncate(fd, sizeof(struct sc_stats_file)) < 0) {
		int rc = -errno;
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		errno = saved;
		return rc;
	}
	struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		unlink(path);
		errno = saved;
		return -ENOMEM;
	}
	/* the header now; the records as they are used (rec_back) */
	if (sc__backed(f, offsetof(struct sc_stats_file, recs)) < 0) {
		munmap(f, sizeof(*f));
		unlink(path);
		errno = saved;
		return -ENOSPC;
	}
	f->pid = sc__pid();
	f->ident = id;
	f->version = SC_STATS_VERSION;
	int cf = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (cf >= 0) {
		ssize_t n = read(cf, f->comm, sizeof(f->comm) - 1);
		if (n > 0 && f->comm[n - 1] == '\n')
			f->comm[n - 1] = 0;
		close(cf);
	}
	/* (a child's hints were its parent's; relaxed: hints, and the file
	 * is published below by stats_file's release) */
	atomic_store_explicit(&rec_low, 0, memory_order_relaxed);
	atomic_store_explicit(&rec_backed, 0, memory_order_relaxed);
	if (child)
		sc__statp = &f->c;      /* the parent's counts stay in its file */
	else
		sc__stats_move(&f->c);
	atomic_store_explicit(&stats_file, f, memory_order_release);
	/* release: the header before the magic; pairs with the acquire in
	 * collect_file and the command's reader (cli/stat.c).  A
	 * builtin: magic is not _Atomic (rundir.h says why) */
	__atomic_store_n(&f->magic, SC_STATS_MAGIC, __ATOMIC_RELEASE);
	/* the files of processes that died since are collected now and then
	 * (a pgbench -C run left 1,612 of them) */
	sc__stats_collect(false);
	errno = saved;
	return 0;
}

/* ---- collecting the stats files of dead processes ---------------------- */

static struct sc_stats_retired *_Atomic retired;
static int retired_fd = -1;

struct sc_stats_retired *sc__stats_retired(int *fdp)
{
	struct sc_stats_retired *r = atomic_load_explicit(&retired, memory_order_acquire);
	const char *d;
	if (r || !(d = sc__rundir())) {
		if (fdp)
			*fdp = retired_fd;
		return r;
	}
	int saved = errno;
	pthread_mutex_lock(&retired_lock);
	r = atomic_load_explicit(&retired, memory_order_relaxed);
	if (!r) {
		char path[320];
		struct stat st;
		snprintf(path, sizeof(path), "%s/" SC_RETIRED_FILE, d);
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			      sc__rundir_file_mode());
		if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0)
			sc__rundir_file_made(fd);
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    sc__rundir_file_ok(&st) &&
		    (st.st_size == sizeof(*r) || (st.st_size == 0 && ftruncate(fd, sizeof(*r)) == 0))) {
			void *m = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED && sc__backed(m, sizeof(*r)) < 0) {
				munmap(m, sizeof(*r));
				m = MAP_FAILED;
			}
			if (m != MAP_FAILED) {
				r = m;
				uint32_t zero = 0;
				/* acq_rel: the first mapper claims the
				 * file; acquire on failure pairs with that
				 * claim (another process's) */
				if (atomic_compare_exchange_strong_explicit(
					    &r->magic, &zero, SC_RETIRED_MAGIC,
					    memory_order_acq_rel, memory_order_acquire))
					r->version = SC_STATS_VERSION;
				if (atomic_load_explicit(&r->magic, memory_order_relaxed) !=
				    SC_RETIRED_MAGIC) {
					munmap(m, sizeof(*r));
					r = NULL;
				}
			}
		}
		if (r) {
			retired_fd = sc__fd_park(fd);
			atomic_store_explicit(&retired, r, memory_order_release);
		} else if (fd >= 0) {
			close(fd);
		}
	}
	pthread_mutex_unlock(&retired_lock);
	if (fdp)
		*fdp = retired_fd;
	errno = saved;
	return r;
}

void sc__stats_fold(struct sc_stats_retired *r, const struct sc_stats_file *f)
{
	const _Atomic uint64_t *src = (const _Atomic uint64_t *)&f->c;
	_Atomic uint64_t *dst = (_Atomic uint64_t *)&r->c;
	for (size_t i = 0; i < sizeof(f->c) / 8; i++)
		atomic_fetch_add_explicit(&dst[i], atomic_load_explicit(&src[i], memory_order_relaxed),
					  memory_order_relaxed);
	for (uint32_t i = 0, n = sc__stats_nrecs(f); i < n; i++) {
		const struct sc_conn_rec *rec = &f->recs[i];
		size_t tx, rx;
		if (!sc__rec_counters(rec, &tx, &rx))
			continue;
		atomic_fetch_add_explicit(&dst[tx], atomic_load_explicit(&rec->bytes_sent, memory_order_relaxed),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&dst[rx], atomic_load_explicit(&rec->bytes_received, memory_order_relaxed),
					  memory_order_relaxed);
	}
	/* levels, not counts: a dead process binds nothing, holds nothing */
	atomic_fetch_sub_explicit(&r->c.dm_bindings, atomic_load_explicit(&f->c.dm_bindings, memory_order_relaxed),
				  memory_order_relaxed);
	atomic_fetch_sub_explicit(&r->c.dm_frags_out, atomic_load_explicit(&f->c.dm_frags_out, memory_order_relaxed),
				  memory_order_relaxed);
	r->processes++;
}

/* fd: a stats file in a format older than ours (its header says so) */
static bool older_format(int fd)
{
	uint32_t h[2];
	return pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) && h[0] == SC_STATS_MAGIC &&
	       h[1] < SC_STATS_VERSION;
}

/* name is PREFIX, 14 hex digits (an identity), SUFFIX: its identity. */
static bool name_ident(const char *name, const char *prefix, const char *suffix, uint64_t *id)
{
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl))
		return false;
	const char *h = name + pl;
	for (int i = 0; i < 14; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return false;
	if (strcmp(h + 14, suffix))
		return false;
	*id = strtoull(h, NULL, 16);
	return *id != 0;
}

/* retired's flock held: the stats file name of process id, dead: folded
 * into r and removed (one that never got its size or its header, or an
 * older format's, only removed; a newer format's stays for its own tools). */
static void collect_file(struct sc_stats_retired *r, int dfd, const char *name, uint64_t id)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || st.st_size != sizeof(struct sc_stats_file)) {
		/* empty: its process died between creating it and giving it
		 * its size (a fork child killed at once) */
		if (st.st_size == 0 || older_format(fd))
			unlinkat(dfd, name, 0);
		close(fd);
		return;
	}
	struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return;
	/* acquire: pairs with the release in stats_open (a builtin: magic is
	 * not _Atomic, rundir.h says why) */
	uint32_t magic = __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE);
	bool ours = magic == SC_STATS_MAGIC && f->version == SC_STATS_VERSION && f->ident == id;
	bool blank = !magic;
	bool older = magic == SC_STATS_MAGIC && f->version < SC_STATS_VERSION;
	/* removed first: of two collectors, the one whose unlink succeeded
	 * folds it */
	if ((ours || blank || older) && unlinkat(dfd, name, 0) == 0 && ours)
		sc__stats_fold(r, f);
	munmap(f, sizeof(*f));
}

/* One file of the run directory, collected if its owner is dead: an
 * offer board (*boards: how many more may be), a rendezvous name, a stats
 * file (folded into the retired counts), an older version's.  Returns
 * how much of the call's budget it took. */
static int collect_entry(struct sc_stats_retired *r, int dfd, const char *name, int *boards)
{
	int pid = 0, end = 0;
	unsigned ver, port;
	uint64_t id;
	if (sscanf(name, "tcp-v%u-%u%n", &ver, &port, &end) == 2 && !name[end]) {
		/* an offer board whose listeners are all dead: each port a
		 * server ever listened on kept one, up to 20 MB of backed
		 * offers (`make bench`: 280 of them, 1.3 GB of /dev/shm) */
		if (ver == SC_BOARD_VERSION && port < 65536 && (*boards)-- > 0) {
			sc__board_collect(dfd, name, (uint16_t)port);
			return 1;
		}
		return 0;
	}
	if (name_ident(name, "p-", ".sock", &id)) {
		/* a dead process's rendezvous name (a live one's stays) */
		if (!sc__proc_alive(id))
			unlinkat(dfd, name, 0);
		return 0;
	}
	if (name_ident(name, "stats-", "", &id)) {
		if (!sc__proc_alive(id))
			collect_file(r, dfd, name, id);
		return 1;
	}
	/* an older version's names (pids): its own liveness rule */
	if (sscanf(name, "p-%d.sock", &pid) == 1) {
		if (pid > 0 && pid != sc__pid() && !sc__pid_exists(pid))
			unlinkat(dfd, name, 0);
		return 0;
	}
	if (!strncmp(name, "stats-", 6) && sscanf(name, "stats-%d-", &pid) == 1 &&
	    pid != sc__pid() && !sc__pid_alive(pid)) {
		/* empty, or an older format's: its counts cannot be folded,
		 * and nobody else would ever remove it */
		int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && (st.st_size == 0 || older_format(fd)))
			unlinkat(dfd, name, 0);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	return 0;
}

void sc__stats_collect(bool force)
{
	int rfd;
	struct sc_stats_retired *r = sc__stats_retired(&rfd);
	const char *d = sc__rundir();
	if (!r || !d)
		return;
	if (!force && atomic_fetch_add_explicit(&r->opens, 1, memory_order_relaxed) % 64)
		return;
	int saved = errno;
	int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = dfd >= 0 ? fdopendir(dfd) : NULL;
	/* a description of our own for the lock (a fork child shares the
	 * mapping's with its parent, and flock would not keep them apart;
	 * its place in the lock order: docs/interposer.md §6b) */
	int lfd = dp ? openat(dfd, SC_RETIRED_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
	if (lfd < 0) {
		if (dp)
			closedir(dp);
		else if (dfd >= 0)
			close(dfd);
		errno = saved;
		return;
	}
	(void)rfd;
	flock(lfd, LOCK_EX);
	struct dirent *e;
	/* a program's collection is bounded (it must not stall on a run
	 * directory left uncollected, or full of live processes' files): it
	 * looks at a random quarter of the files, 256 of them at most (32
	 * boards), so that every file is looked at now and then whatever the
	 * directory's order; `shortcut stats` looks at all */
	int budget = force ? INT_MAX : 256, boards = force ? INT_MAX : 32;
	uint32_t rnd = (uint32_t)sc__pid() * 2654435761u ^ (uint32_t)sc__now_ns();
	while (budget > 0 && (e = readdir(dp))) {
		if (e->d_name[0] == '.')
			continue;
		rnd ^= rnd << 13;
		rnd ^= rnd >> 17;
		rnd ^= rnd << 5;
		if (!force && (rnd & 3))
			continue;
		budget -= collect_entry(r, dfd, e->d_name, &boards);
	}
	/* unlocked first: a fork meanwhile gave the child a copy of lfd, which
	 * would keep the flock with its description */
	flock(lfd, LOCK_UN);
	close(lfd);
	closedir(dp);
	errno = saved;
}
