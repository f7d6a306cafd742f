/* SPDX-License-Identifier: MIT */
/*
 * Run directory, offer boards, rendezvous paths and stats files (rundir.h).
 * Everything here is shared with other processes of the same user: values
 * read from a board are hints, checked again before anything relies on them
 * (the claimer connects to the client's rendezvous and names the tag; the
 * link layer validates everything it maps).
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <pthread.h>
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

static _Atomic int32_t cached_pid;

static void pid_forget(void)
{
	atomic_store(&cached_pid, 0);
}

void sc__pid_reset(void)
{
	atomic_store(&cached_pid, 0);
}

static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_init(void)
{
	pthread_atfork(NULL, NULL, pid_forget);
}

int32_t sc__pid(void)
{
	int32_t p = atomic_load_explicit(&cached_pid, memory_order_relaxed);
	if (p)
		return p;
	pthread_once(&pid_once, pid_init);
	p = getpid();
	atomic_store_explicit(&cached_pid, p, memory_order_relaxed);
	return p;
}

static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
static char dir[256];
static bool dir_ok;
static uint64_t netns_ino;

static int mkdir_private(const char *p)
{
	struct stat st;

	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(p, &st) < 0)
		return -errno;
	/* another user's directory would let them impersonate listeners */
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	return 0;
}

static void dir_init(void)
{
	const char *e = getenv("SHORTCUT_RUNDIR");
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n;

	if (e && *e)
		n = snprintf(dir, sizeof(dir), "%s", e);
	else if (x && *x)
		n = snprintf(dir, sizeof(dir), "%s/shortcut", x);
	else
		n = snprintf(dir, sizeof(dir), "/tmp/shortcut-%u", (unsigned)geteuid());
	/* room for "/p-PID.sock" inside sun_path (108 bytes) */
	dir_ok = n > 0 && n < 80 && mkdir_private(dir) == 0;
	if (stat("/proc/self/ns/net", &st) == 0)
		netns_ino = st.st_ino;
}

const char *sc__rundir(void)
{
	pthread_once(&dir_once, dir_init);
	return dir_ok ? dir : NULL;
}

uint64_t sc__netns(void)
{
	pthread_once(&dir_once, dir_init);
	return netns_ino;
}

/* ---- addresses ---------------------------------------------------------- */

bool sc__addr16(const struct sockaddr *sa, struct sc_addr16 *out, uint16_t *port)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		out->b[10] = out->b[11] = 0xff;
		memcpy(&out->b[12], &s4->sin_addr, 4);
		if (port)
			*port = ntohs(s4->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		memcpy(out->b, &s6->sin6_addr, 16);
		if (port)
			*port = ntohs(s6->sin6_port);
		return true;
	}
	return false;
}

static bool is_v4(const struct sc_addr16 *a)
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };
	return !memcmp(a->b, pre, 12);
}

bool sc__addr_is_loopback(const struct sc_addr16 *a)
{
	static const uint8_t one[16] = { [15] = 1 };
	if (is_v4(a))
		return a->b[12] == 127;
	return !memcmp(a->b, one, 16);
}

bool sc__addr_is_any(const struct sc_addr16 *a)
{
	static const uint8_t zero[16];
	if (is_v4(a))
		return !memcmp(&a->b[12], zero, 4);
	return !memcmp(a->b, zero, 16);
}

static bool pid_alive(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* ---- boards ------------------------------------------------------------- */

static pthread_mutex_t board_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_board *_Atomic boards[65536];
static int board_fd[65536];

struct sc_board *sc__board(uint16_t port, bool create)
{
	struct sc_board *b = atomic_load_explicit(&boards[port], memory_order_acquire);
	const char *d;
	char path[320];
	struct stat st;
	int fd, saved = errno;

	if (b || !(d = sc__rundir()))
		return b;
	snprintf(path, sizeof(path), "%s/tcp-v%u-%u", d, SC_BOARD_VERSION, port);
	pthread_mutex_lock(&board_lock);
	b = atomic_load_explicit(&boards[port], memory_order_relaxed);
	if (b)
		goto out;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
	if (fd < 0)
		goto out;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_size != sizeof(*b) && (!create || st.st_size != 0 ||
					  ftruncate(fd, sizeof(*b)) < 0))) {
		close(fd);
		goto out;
	}
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED) {
		b = NULL;
		close(fd);
		goto out;
	}
	uint32_t zero = 0;
	if (__atomic_compare_exchange_n(&b->magic, &zero, SC_BOARD_MAGIC, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		b->version = SC_BOARD_VERSION;
		b->port = port;
	} else if (zero != SC_BOARD_MAGIC) {
		munmap(b, sizeof(*b));
		close(fd);
		b = NULL;
		goto out;
	}
	board_fd[port] = fd;
	atomic_store_explicit(&boards[port], b, memory_order_release);
out:
	pthread_mutex_unlock(&board_lock);
	errno = saved;
	return b;
}

static int local_addrs(struct sc_addr16 *out, int max)
{
	struct ifaddrs *ifa, *i;
	int n = 0;

	if (getifaddrs(&ifa) < 0)
		return 0;
	for (i = ifa; i && n < max; i = i->ifa_next) {
		struct sc_addr16 a;
		if (!i->ifa_addr || !sc__addr16(i->ifa_addr, &a, NULL) ||
		    sc__addr_is_loopback(&a))
			continue;       /* loopback is matched by namespace */
		out[n++] = a;
	}
	freeifaddrs(ifa);
	return n;
}

/* Write listener entry t for process pid (board flock held): into the
 * entry pid already has for that socket, or a free or dead one. */
static int board_put(struct sc_board *b, int32_t pid, const struct sc_board_listener *t)
{
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		int32_t p = atomic_load(&l->pid);
		if (p && pid_alive(p) && !(p == pid && l->sock_ino == t->sock_ino))
			continue;
		l->naddr = 0;
		atomic_store(&l->pid, pid);
		l->netns = t->netns;
		l->sock_ino = t->sock_ino;
		l->wildcard = t->wildcard;
		memcpy(l->addr, t->addr, sizeof(l->addr));
		/* naddr last: a reader sees the addresses complete */
		__atomic_store_n(&l->naddr, t->naddr, __ATOMIC_RELEASE);
		return 0;
	}
	return -ENOSPC;
}

int sc__board_listen(struct sc_board *b, const struct sc_addr16 *addr, uint64_t sock_ino)
{
	int fd = board_fd[b->port], rc, saved = errno;
	struct sc_board_listener t = { .netns = sc__netns(), .sock_ino = sock_ino,
				       .wildcard = sc__addr_is_any(addr), .naddr = 1 };

	if (t.wildcard)
		t.naddr = (uint32_t)local_addrs(t.addr, SC_BOARD_ADDRS);
	else
		t.addr[0] = *addr;
	if (!t.naddr)
		t.naddr = SC_BOARD_ADDRS + 1;   /* wildcard, loopback only */
	flock(fd, LOCK_EX);
	rc = board_put(b, sc__pid(), &t);
	flock(fd, LOCK_UN);
	errno = saved;
	return rc;
}

int sc__board_listen_inherit(struct sc_board *b, uint64_t sock_ino, int32_t parent,
			     int32_t child)
{
	int fd = board_fd[b->port], rc = -ENOENT, saved = errno;

	flock(fd, LOCK_EX);
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		if (atomic_load(&l->pid) == parent && l->sock_ino == sock_ino) {
			struct sc_board_listener t;
			memcpy(&t, l, sizeof(t));
			rc = board_put(b, child, &t);
			break;
		}
	}
	flock(fd, LOCK_UN);
	errno = saved;
	return rc;
}

void sc__board_unlisten(struct sc_board *b, uint64_t sock_ino)
{
	int fd = board_fd[b->port], saved = errno;
	int32_t me = sc__pid();

	flock(fd, LOCK_EX);
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		if (atomic_load(&l->pid) == me && l->sock_ino == sock_ino)
			atomic_store(&l->pid, 0);
	}
	flock(fd, LOCK_UN);
	errno = saved;
}

/* pid liveness, remembered for a moment (a kill(0) per connect adds up) */
static bool pid_alive_cached(int32_t pid)
{
	static __thread int32_t last_pid;
	static __thread uint64_t last_ns;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (pid == last_pid && now - last_ns < 50000000u)
		return true;
	if (!pid_alive(pid))
		return false;
	last_pid = pid;
	last_ns = now;
	return true;
}

bool sc__board_serves(struct sc_board *b, const struct sc_addr16 *dst)
{
	bool loop = sc__addr_is_loopback(dst);
	int saved = errno;
	bool yes = false;

	for (int i = 0; i < SC_BOARD_LISTENERS && !yes; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		int32_t pid = atomic_load(&l->pid);
		uint32_t n = __atomic_load_n(&l->naddr, __ATOMIC_ACQUIRE);
		if (!pid || !n)
			continue;
		if (n > SC_BOARD_ADDRS)
			n = 0;  /* wildcard with no address besides loopback */
		if (loop) {
			/* 127.0.0.1 in another namespace is another host */
			if (l->netns != sc__netns())
				continue;
			if (l->wildcard || sc__addr_is_loopback(&l->addr[0]))
				yes = !memcmp(&l->addr[0], dst, 16) || l->wildcard;
		} else {
			for (uint32_t k = 0; k < n && !yes; k++)
				yes = !memcmp(&l->addr[k], dst, 16);
		}
		if (yes && !pid_alive_cached(pid))
			yes = false;
	}
	errno = saved;
	return yes;
}

/* ---- offers ------------------------------------------------------------- */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The entry names this 4-tuple (as its writer saw it). */
static bool offer_matches(const struct sc_offer *o, uint16_t cport, const struct sc_addr16 *a)
{
	return o->cport == cport && !memcmp(&o->daddr, a, 16) &&
	       (!sc__addr_is_loopback(a) || o->netns == sc__netns());
}

/* A decline younger than this answers a late offer; older, it is left
 * over (its connection long gone, the port in use again). */
#define DECLINE_FRESH_MS 1000u

int sc__offer_post(struct sc_board *b, uint16_t cport, const struct sc_addr16 *dst,
		   uint64_t tag)
{
	struct sc_offer *o = &b->offers[cport];
	int saved = errno;

	for (;;) {
		uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
		uint32_t st = w & 0xff;
		if (st == SC_OFFER_DECLINED && (w >> 8) == 0 && offer_matches(o, cport, dst) &&
		    mono_ms() - o->time_ms < DECLINE_FRESH_MS) {
			/* the accepting side was first: it saw no mark */
			atomic_compare_exchange_strong(&o->word, &w, 0);
			errno = saved;
			return -ECONNREFUSED;
		}
		if (st != SC_OFFER_FREE && st != SC_OFFER_DECLINED && st != SC_OFFER_WITHDRAWN &&
		    pid_alive(o->pid)) {
			errno = saved;
			return -EBUSY;          /* a live offer of another netns */
		}
		if (!atomic_compare_exchange_strong(&o->word, &w, SC_OFFER_WORD(tag, SC_OFFER_BUSY)))
			continue;
		o->cport = cport;
		o->daddr = *dst;
		o->netns = sc__netns();
		o->pid = sc__pid();
		o->time_ms = mono_ms();
		atomic_store_explicit(&o->word, SC_OFFER_WORD(tag, SC_OFFER_OFFERED),
				      memory_order_release);
		errno = saved;
		return cport;
	}
}

uint32_t sc__offer_state(struct sc_board *b, int idx, uint64_t tag)
{
	uint64_t w = atomic_load_explicit(&b->offers[idx].word, memory_order_acquire);
	if (w >> 8 != tag)
		return SC_OFFER_CLAIMED;        /* claimed and done with */
	return w & 0xff;
}

bool sc__offer_withdraw(struct sc_board *b, int idx, uint64_t tag)
{
	_Atomic uint64_t *w = &b->offers[idx].word;
	uint64_t v = SC_OFFER_WORD(tag, SC_OFFER_OFFERED);
	/* the fields stay: an acceptor that has not looked yet learns that
	 * the client is gone instead of waiting for an offer */
	if (atomic_compare_exchange_strong(w, &v, SC_OFFER_WORD(tag, SC_OFFER_WITHDRAWN)))
		return true;
	v = SC_OFFER_WORD(tag, SC_OFFER_DECLINED);
	return atomic_compare_exchange_strong(w, &v, 0);
}

bool sc__offer_withdrawn(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);

	/* fresh only: an older connection of the same 4-tuple (TIME_WAIT
	 * reuse on loopback takes a second at least) left its entry too */
	return (w & 0xff) == SC_OFFER_WITHDRAWN && offer_matches(o, cport, local) &&
	       mono_ms() - o->time_ms < 1000;
}

int sc__offer_claim(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
		    int32_t *pid, uint64_t *tag)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);

	if ((w & 0xff) != SC_OFFER_OFFERED || !offer_matches(o, cport, local))
		return -1;
	int32_t p = o->pid;
	/* the fields were written before the word went OFFERED with this
	 * tag; if the CAS succeeds, they are that offer's */
	if (!atomic_compare_exchange_strong(&o->word, &w, SC_OFFER_WORD(w >> 8, SC_OFFER_CLAIMED)))
		return -1;
	*pid = p;
	*tag = w >> 8;
	return cport;
}

int sc__offer_decline_tuple(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
			    int *idx)
{
	struct sc_offer *o = &b->offers[cport];
	int saved = errno;

	*idx = -1;
	for (;;) {
		uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
		uint32_t st = w & 0xff;
		if (st == SC_OFFER_OFFERED && offer_matches(o, cport, local))
			return -EAGAIN;         /* it came after all */
		if (st == SC_OFFER_BUSY && pid_alive(o->pid)) {
			/* an offer being written: ours, or another netns's */
			sched_yield();
			continue;
		}
		if (st != SC_OFFER_FREE && st != SC_OFFER_DECLINED && st != SC_OFFER_WITHDRAWN &&
		    pid_alive(o->pid)) {
			errno = saved;
			return 0;               /* another's: our client cannot post */
		}
		if (!atomic_compare_exchange_strong(&o->word, &w, SC_OFFER_WORD(0, SC_OFFER_BUSY)))
			continue;
		o->cport = cport;
		o->daddr = *local;
		o->netns = sc__netns();
		o->pid = sc__pid();
		o->time_ms = mono_ms();
		atomic_store_explicit(&o->word, SC_OFFER_WORD(0, SC_OFFER_DECLINED),
				      memory_order_release);
		*idx = cport;
		errno = saved;
		return 0;
	}
}

void sc__offer_undecline(struct sc_board *b, int idx, const struct sc_addr16 *local)
{
	struct sc_offer *o = &b->offers[idx];
	uint64_t w = SC_OFFER_WORD(0, SC_OFFER_DECLINED);
	if (offer_matches(o, (uint16_t)idx, local) && o->pid == sc__pid())
		atomic_compare_exchange_strong(&o->word, &w, 0);
}

void sc__offer_done(struct sc_board *b, int idx)
{
	atomic_store_explicit(&b->offers[idx].word, 0, memory_order_release);
}

void sc__offer_decline(struct sc_board *b, int idx, uint64_t tag)
{
	atomic_store_explicit(&b->offers[idx].word, SC_OFFER_WORD(tag, SC_OFFER_DECLINED),
			      memory_order_release);
}

/* ---- rendezvous and stats ---------------------------------------------- */

int sc__rendezvous_path(int32_t pid, char *buf, size_t len)
{
	const char *d = sc__rundir();
	if (!d)
		return -ENOENT;
	int n = snprintf(buf, len, "%s/p-%d.sock", d, (int)pid);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}


static struct sc_stats_file *_Atomic stats_file;
static _Atomic uint32_t rec_hint;

struct sc_conn_rec *sc__rec_get(void)
{
	struct sc_stats_file *f = atomic_load_explicit(&stats_file, memory_order_acquire);
	if (!f)
		return NULL;
	uint32_t h = atomic_fetch_add_explicit(&rec_hint, 1, memory_order_relaxed);
	for (uint32_t i = 0; i < SC_STAT_RECS; i++) {
		struct sc_conn_rec *r = &f->recs[(h + i) % SC_STAT_RECS];
		uint32_t z = SC_REC_FREE;
		if (atomic_load_explicit(&r->mode, memory_order_relaxed) == SC_REC_FREE &&
		    atomic_compare_exchange_strong(&r->mode, &z, SC_REC_TCP)) {
			atomic_store_explicit(&r->bytes_sent, 0, memory_order_relaxed);
			atomic_store_explicit(&r->bytes_received, 0, memory_order_relaxed);
			r->reason = 0;
			r->peer_pid = 0;
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
	if (r)
		atomic_store_explicit(&r->mode, SC_REC_FREE, memory_order_release);
}

static int stats_open(bool child);

int sc__stats_file_open(void)
{
	return stats_open(false);
}

int sc__stats_file_open_child(void)
{
	/* only if the parent had one: a child that never opens a TCP
	 * socket (fork + exec of a helper) leaves no file behind */
	if (!atomic_exchange(&stats_file, NULL))
		return 0;
	return stats_open(true);
}

static int stats_open(bool child)
{
	const char *d = sc__rundir();
	char path[320];
	uint32_t r = 0;
	int fd, saved = errno;

	if (!d)
		return -ENOENT;
	if (getentropy(&r, sizeof(r)) < 0)
		r = (uint32_t)(uintptr_t)&r;
	snprintf(path, sizeof(path), "%s/stats-%d-%08x", d, (int)sc__pid(), r);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(struct sc_stats_file)) < 0) {
		int rc = -errno;
		if (fd >= 0)
			close(fd);
		errno = saved;
		return rc;
	}
	struct sc_stats_file *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED) {
		errno = saved;
		return -ENOMEM;
	}
	f->pid = sc__pid();
	f->version = SC_STATS_VERSION;
	int cf = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (cf >= 0) {
		ssize_t n = read(cf, f->comm, sizeof(f->comm) - 1);
		if (n > 0 && f->comm[n - 1] == '\n')
			f->comm[n - 1] = 0;
		close(cf);
	}
	if (child)
		sc__statp = &f->c;      /* the parent's counts stay in its file */
	else
		sc__stats_move(&f->c);
	atomic_store_explicit(&stats_file, f, memory_order_release);
	__atomic_store_n(&f->magic, SC_STATS_MAGIC, __ATOMIC_RELEASE);
	errno = saved;
	return 0;
}
