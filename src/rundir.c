/* SPDX-License-Identifier: MIT */
/*
 * Run directory, offer boards, rendezvous paths and stats files (rundir.h).
 * Everything here is shared with other processes of the same user: values
 * read from a board are hints, checked again before anything relies on them
 * (the claimer connects to the client's rendezvous and names the tag; the
 * link layer validates everything it maps).
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
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
static char dir_err[400];
static uint64_t netns_ino;

static int mkdir_private(const char *p)
{
	struct stat st;
	int saved = errno;

	if (mkdir(p, 0700) < 0 && errno != EEXIST) {
		snprintf(dir_err, sizeof(dir_err), "%s: cannot create it (%s); set "
			 "SHORTCUT_RUNDIR to a directory this user may create", p, strerror(errno));
		errno = saved;
		return -1;
	}
	if (lstat(p, &st) < 0) {
		snprintf(dir_err, sizeof(dir_err), "%s: %s", p, strerror(errno));
		errno = saved;
		return -1;
	}
	/* another user's directory would let them impersonate listeners */
	if (!S_ISDIR(st.st_mode)) {
		snprintf(dir_err, sizeof(dir_err), "%s: not a directory; set SHORTCUT_RUNDIR "
			 "to a directory path", p);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		snprintf(dir_err, sizeof(dir_err), "%s: owned by uid %u, not by this user (uid %u); "
			 "run both ends as one user, or set SHORTCUT_RUNDIR to a directory of "
			 "this user's on both sides", p, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	errno = saved;
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
	if (n <= 0 || n >= 80)
		snprintf(dir_err, sizeof(dir_err), "%.100s...: longer than 79 bytes (a Unix "
			 "socket name must fit); set SHORTCUT_RUNDIR to a shorter path", dir);
	else
		dir_ok = mkdir_private(dir) == 0;
	if (stat("/proc/self/ns/net", &st) == 0)
		netns_ino = st.st_ino;
}

const char *sc__rundir(void)
{
	pthread_once(&dir_once, dir_init);
	return dir_ok ? dir : NULL;
}

const char *sc__rundir_error(void)
{
	pthread_once(&dir_once, dir_init);
	return dir_ok ? "" : dir_err;
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
/* Our own description of a board, for the locks of our listener entries
 * (fd + 1; 0: none); the ports that have one, for the fork child. */
static int board_lkfd[65536];
static uint16_t lk_ports[64];
static int n_lk_ports;

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

/* board flock held: our lock description of b's file (opened on first use) */
static int lock_fd(struct sc_board *b)
{
	uint16_t port = (uint16_t)b->port;
	if (!board_lkfd[port]) {
		char path[320];
		snprintf(path, sizeof(path), "%s/tcp-v%u-%u", sc__rundir(), SC_BOARD_VERSION, port);
		int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return -1;
		board_lkfd[port] = fd + 1;
		if (n_lk_ports < (int)(sizeof(lk_ports) / sizeof(lk_ports[0])))
			lk_ports[n_lk_ports++] = port;
	}
	return board_lkfd[port] - 1;
}

static struct flock entry_range(int i, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = (off_t)(offsetof(struct sc_board, listeners) +
					       (size_t)i * sizeof(struct sc_board_listener)),
			    .l_len = 1 };
	return fl;
}

/* board flock held: take (F_WRLCK) or drop (F_UNLCK) our lock on entry i */
static int entry_lock(struct sc_board *b, int i, short type)
{
	int fd = lock_fd(b);
	struct flock fl = entry_range(i, type);
	return fd < 0 ? -1 : fcntl(fd, F_OFD_SETLK, &fl);
}

/* Is listener entry i's process alive, with the socket it named?  (its
 * lock held; or written by a parent for a child still starting) */
static bool entry_live(struct sc_board *b, int i)
{
	struct sc_board_listener *l = &b->listeners[i];
	int32_t pid = atomic_load(&l->pid);
	if (!pid)
		return false;
	if (atomic_load(&l->prereg))
		return pid_alive(pid);
	struct flock fl = entry_range(i, F_WRLCK);
	if (fcntl(board_fd[b->port], F_OFD_GETLK, &fl) < 0)
		return pid_alive(pid);          /* no OFD locks here: the pid must do */
	return fl.l_type != F_UNLCK;
}

void sc__board_atfork_child(void)
{
	for (int k = 0; k < n_lk_ports; k++) {
		uint16_t port = lk_ports[k];
		if (board_lkfd[port])
			close(board_lkfd[port] - 1);
		board_lkfd[port] = 0;
	}
	n_lk_ports = 0;
}

/* Write listener entry t for process pid (board flock held): into the
 * entry pid already has for that socket, or a free or dead one.  Our own
 * entry is locked; a child's (written by its parent at fork) is marked
 * prereg until the child locks it. */
static int board_put(struct sc_board *b, int32_t pid, const struct sc_board_listener *t)
{
	bool mine = pid == sc__pid();
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		int32_t p = atomic_load(&l->pid);
		bool same = p == pid && l->sock_ino == t->sock_ino;
		if (p && !same && entry_live(b, i))
			continue;
		if (mine && entry_lock(b, i, F_WRLCK) < 0) {
			if (errno == EAGAIN || errno == EACCES)
				continue;       /* held: live after all */
			return -errno;
		}
		l->naddr = 0;
		atomic_store(&l->pid, pid);
		atomic_store(&l->prereg, mine ? 0u : 1u);
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
		if (atomic_load(&l->pid) == me && l->sock_ino == sock_ino) {
			atomic_store(&l->pid, 0);
			entry_lock(b, i, F_UNLCK);
		}
	}
	flock(fd, LOCK_UN);
	errno = saved;
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
		if (yes && !entry_live(b, i))
			yes = false;    /* gone: killed, exec'd, or a zombie */
	}
	errno = saved;
	return yes;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- connecting clients --------------------------------------------------
 *
 * A client takes a slot before its connect() and frees it once its offer is
 * posted: microseconds, unless it is descheduled.  A slot older than
 * SLOT_WAIT_MS is not waited for (its client was killed in between, or is
 * stopped); older than SLOT_STALE_MS, another client may take it.
 */
#define SLOT_WAIT_MS  200u
#define SLOT_STALE_MS 1000u

int sc__board_connecting(struct sc_board *b)
{
	int32_t me = sc__pid();
	uint32_t now = (uint32_t)mono_ms();
	for (int i = 0; i < SC_BOARD_CONNECTING; i++) {
		struct sc_board_connecting *c = &b->connecting[i];
		int32_t p = atomic_load_explicit(&c->pid, memory_order_relaxed);
		if (p && now - atomic_load_explicit(&c->t_ms, memory_order_relaxed) < SLOT_STALE_MS)
			continue;
		if (!atomic_compare_exchange_strong(&c->pid, &p, me))
			continue;
		/* (a reader that sees the pid before the time takes the old
		 * time: at worst it does not wait for this client) */
		atomic_store_explicit(&c->t_ms, now, memory_order_release);
		return i;
	}
	return -1;
}

void sc__board_connected(struct sc_board *b, int slot)
{
	if (slot >= 0 && slot < SC_BOARD_CONNECTING) {
		int32_t me = sc__pid();
		/* ours still (a stale slot may have been taken over) */
		atomic_compare_exchange_strong(&b->connecting[slot].pid, &me, 0);
	}
}

bool sc__board_anyone_connecting(struct sc_board *b)
{
	uint32_t now = (uint32_t)mono_ms();
	for (int i = 0; i < SC_BOARD_CONNECTING; i++) {
		struct sc_board_connecting *c = &b->connecting[i];
		if (atomic_load_explicit(&c->pid, memory_order_acquire) &&
		    now - atomic_load_explicit(&c->t_ms, memory_order_acquire) < SLOT_WAIT_MS)
			return true;
	}
	return false;
}

/* ---- offers ------------------------------------------------------------- */

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

int32_t sc__offer_claimer(struct sc_board *b, int idx, uint64_t tag)
{
	struct sc_offer *o = &b->offers[idx];
	int32_t who = atomic_load_explicit(&o->claimer, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
	return w == SC_OFFER_WORD(tag, SC_OFFER_CLAIMED) ? who : 0;
}

bool sc__pid_alive(int32_t pid)
{
	if (!pid_alive(pid))
		return false;
	/* a zombie answers kill(0) but will never do anything again */
	char path[64], st[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return true;
	st[n] = 0;
	const char *p = strrchr(st, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
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
	/* one process accepts a connection: no other claimer races us */
	atomic_store_explicit(&o->claimer, sc__pid(), memory_order_relaxed);
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
	/* the files of processes that died since are collected now and then
	 * (a pgbench -C run left 1,612 of them) */
	sc__stats_collect(false);
	errno = saved;
	return 0;
}

/* ---- collecting the stats files of dead processes ---------------------- */

static struct sc_stats_retired *_Atomic retired;
static int retired_fd = -1;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;

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
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() &&
		    (st.st_size == sizeof(*r) || (st.st_size == 0 && ftruncate(fd, sizeof(*r)) == 0))) {
			void *m = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (m != MAP_FAILED) {
				r = m;
				uint32_t zero = 0;
				if (__atomic_compare_exchange_n(&r->magic, &zero, SC_RETIRED_MAGIC, false,
								__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
					r->version = SC_STATS_VERSION;
				if (r->magic != SC_RETIRED_MAGIC) {
					munmap(m, sizeof(*r));
					r = NULL;
				}
			}
		}
		if (r) {
			retired_fd = fd;
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

/* retired's flock held exclusively: fold one dead process's file into it
 * (what it counted, and the bytes of shared-memory connections it never
 * closed, as `shortcut stats` counts them) */
static void fold(struct sc_stats_retired *r, const struct sc_stats_file *f)
{
	const _Atomic uint64_t *src = (const _Atomic uint64_t *)&f->c;
	_Atomic uint64_t *dst = (_Atomic uint64_t *)&r->c;
	for (size_t i = 0; i < sizeof(f->c) / 8; i++)
		atomic_fetch_add_explicit(&dst[i], atomic_load_explicit(&src[i], memory_order_relaxed),
					  memory_order_relaxed);
	for (int i = 0; i < SC_STAT_RECS; i++) {
		const struct sc_conn_rec *rec = &f->recs[i];
		if (atomic_load_explicit(&rec->mode, memory_order_acquire) != SC_REC_SHM)
			continue;
		atomic_fetch_add_explicit(&r->c.bytes_sent, atomic_load(&rec->bytes_sent),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&r->c.bytes_received, atomic_load(&rec->bytes_received),
					  memory_order_relaxed);
	}
	r->processes++;
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
	 * mapping's with its parent, and flock would not keep them apart) */
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
	while ((e = readdir(dp))) {
		int pid = 0;
		if (sscanf(e->d_name, "p-%d.sock", &pid) == 1) {
			/* a dead process's rendezvous name (a live one's stays) */
			if (pid > 0 && pid != sc__pid() && !pid_alive(pid))
				unlinkat(dfd, e->d_name, 0);
			continue;
		}
		if (strncmp(e->d_name, "stats-", 6) || sscanf(e->d_name, "stats-%d-", &pid) != 1)
			continue;
		if (pid == sc__pid() || sc__pid_alive(pid))
			continue;
		int fd = openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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
		/* a file whose process died before it was written is dropped
		 * too; one in another format stays for its own tools */
		bool ours = __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) == SC_STATS_MAGIC &&
			    f->version == SC_STATS_VERSION && f->pid == pid;
		bool blank = !__atomic_load_n(&f->magic, __ATOMIC_ACQUIRE);
		/* removed first: of two collectors, the one whose unlink
		 * succeeded folds it */
		if ((ours || blank) && unlinkat(dfd, e->d_name, 0) == 0 && ours)
			fold(r, f);
		munmap(f, sizeof(*f));
	}
	close(lfd);             /* (the lock goes with it) */
	closedir(dp);
	errno = saved;
}
