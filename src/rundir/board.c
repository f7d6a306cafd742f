/* SPDX-License-Identifier: MIT */
/*
 * Offer boards, one per TCP port: the live listeners (OFD-locked
 * entries), the clients between connect() and their offer, one offer entry
 * per client port.  Everything here is shared with other processes of the
 * same user: values read from a board are hints, checked again before
 * anything relies on them (the claimer connects to the client's rendezvous
 * and names the tag; the link layer validates everything it maps).
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
#include "forkreset.h"

/* ---- boards ------------------------------------------------------------- */

/*
 * A process maps the board of each port it meets, and keeps it while it is
 * held (sc__board's reference: a listener's, a connection's) and, once
 * nobody holds it, among the SC_BOARD_CACHE boards mapped: mapping a new
 * one beyond that unmaps the board looked up least recently that nobody
 * holds.  (Without it every board stays mapped: 501 of 4 MB each after a
 * 1,000-round soak.)
 *
 * The look-up of a mapped board takes no lock: a compare-and-swap on its
 * slot's count.  Unmapping (board_lock held) swaps a count of 0 for
 * SLOT_DEAD first, so it never unmaps a board taken meanwhile, and a
 * look-up that meets SLOT_DEAD, or finds the pointer gone once it counted
 * itself in, goes the locked way.
 */
#define SLOT_DEAD INT32_MIN

static pthread_mutex_t board_lock = PTHREAD_MUTEX_INITIALIZER; /* order: docs/interposer.md §6b */
SC_LOCK_RANK(board_lock, LO_BOARD)
static struct board_slot {
	struct sc_board *_Atomic b;     /* written under board_lock */
	_Atomic int32_t refs;           /* holders; SLOT_DEAD: being unmapped */
	_Atomic uint32_t used;          /* board_epoch at its last look-up */
	_Atomic uint64_t ino;           /* the file mapped there (board_lock) */
} slots[65536];
/* +1 per board mapped: a look-up stamps its slot with it (a store only
 * when it changed: hot boards' slots stay clean in the cache) */
static _Atomic uint32_t board_epoch;
/* The ports whose board is mapped (board_lock); mapped[] may name a port
 * whose board is gone (a fork in the middle of an update): dropped when met. */
static uint16_t mapped[65536];
static int nmapped;
/* The port being unmapped (board_lock), for a fork child: -1 if none. */
static _Atomic int unmapping = -1;

/* Our own description of a board, for the locks of our listener entries
 * (fd + 1; 0: none); the ports that have one, for the fork child. */
static int board_lkfd[65536];
static uint16_t lk_ports[64];
static int n_lk_ports;
/* guards the three above: threads of ours on different ports (or on one
 * port whose board file is gone, sc__board_unlisten) met in them; a leaf,
 * taken under a board's flock (order: docs/interposer.md §6b) */
static pthread_mutex_t lk_lock = PTHREAD_MUTEX_INITIALIZER;
SC_LOCK_RANK(lk_lock, LO_LK)

/* A new description of port's board file (-1: none).  A mapped board
 * keeps no fd open: a client that meets many ports (a new server's each
 * time) would keep one per port (300 rounds: +300 fds).  The
 * flock, and the OFD lock look-ups, use one opened for them (the flock's
 * place in the lock order: docs/interposer.md §6b). */
static bool board_path(uint16_t port, char path[320])
{
	const char *d = sc__rundir();

	if (!d)
		return false;
	snprintf(path, 320, "%s/tcp-v%u-%u", d, SC_BOARD_VERSION, port);
	return true;
}

static int board_open(uint16_t port, int flags)
{
	char path[320];

	if (!board_path(port, path))
		return -1;
	return open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | flags, sc__rundir_file_mode());
}

static void slot_touch(struct board_slot *sl)
{
	uint32_t e = atomic_load_explicit(&board_epoch, memory_order_relaxed);
	if (atomic_load_explicit(&sl->used, memory_order_relaxed) != e)
		atomic_store_explicit(&sl->used, e, memory_order_relaxed);
}

/* Count ourselves in on sl's board b (seen in sl->b); false if it is being
 * unmapped, or was unmapped since we saw it (then nothing is counted). */
static bool slot_hold(struct board_slot *sl, struct sc_board *b)
{
	int32_t r = atomic_load_explicit(&sl->refs, memory_order_relaxed);
	do {
		if (r < 0)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&sl->refs, &r, r + 1, memory_order_seq_cst,
							memory_order_relaxed));
	/* (seq_cst both: either the unmapper's 0 -> SLOT_DEAD came first and
	 * failed our exchange, or ours came first and failed its; and a hold
	 * taken after the unmap's refs = 0 sees its b = NULL: "the slot's
	 * hold/unmap pattern" below) */
	if (atomic_load_explicit(&sl->b, memory_order_seq_cst) != b) {
		/* (relaxed: a count we took back, nothing to publish) */
		atomic_fetch_sub_explicit(&sl->refs, 1, memory_order_relaxed);
		return false;
	}
	slot_touch(sl);
	return true;
}

/* board_lock held: unmap boards nobody holds, least recently looked up
 * first, until fewer than SC_BOARD_CACHE are mapped (or all are held). */
static void boards_trim(void)
{
	uint32_t now = atomic_load_explicit(&board_epoch, memory_order_relaxed);
	while (nmapped >= SC_BOARD_CACHE) {
		int best = -1;
		uint32_t age = 0;
		for (int i = 0; i < nmapped; i++) {
			struct board_slot *sl = &slots[mapped[i]];
			/* (relaxed: sl->b changes under board_lock, held) */
			if (!atomic_load_explicit(&sl->b, memory_order_relaxed)) {
				mapped[i--] = mapped[--nmapped];
				continue;
			}
			uint32_t a = now - atomic_load_explicit(&sl->used, memory_order_relaxed);
			/* (relaxed: a candidate; the compare-exchange decides) */
			if (atomic_load_explicit(&sl->refs, memory_order_relaxed) == 0 &&
			    (best < 0 || a > age)) {
				best = i;
				age = a;
			}
		}
		if (best < 0)
			return;                 /* every one held */
		uint16_t port = mapped[best];
		struct board_slot *sl = &slots[port];
		int32_t zero = 0;
		/* seq_cst, all: the slot's hold/unmap pattern (slot_hold);
		 * unmapping is read by a fork child (sc__board_atfork_child) */
		atomic_store_explicit(&unmapping, port, memory_order_seq_cst);
		if (atomic_compare_exchange_strong_explicit(&sl->refs, &zero, SLOT_DEAD,
							    memory_order_seq_cst,
							    memory_order_seq_cst)) {
			/* the pointer goes before the mapping (a fork child
			 * that finds it still there may keep using it) */
			struct sc_board *b = atomic_exchange_explicit(&sl->b, NULL,
								      memory_order_seq_cst);
			mapped[best] = mapped[--nmapped];
			munmap(b, sizeof(*b));
			atomic_store_explicit(&sl->refs, 0, memory_order_seq_cst);
		}
		atomic_store_explicit(&unmapping, -1, memory_order_seq_cst);
	}
}


struct sc_board *sc__board(uint16_t port, bool create)
{
	struct board_slot *sl = &slots[port];
	struct sc_board *b = atomic_load_explicit(&sl->b, memory_order_acquire);
	struct stat st;
	int fd, saved = errno;

	if (b && slot_hold(sl, b))
		return b;
	if (create)
		sc__port_mark(port);
	else if (!sc__port_listened(port))
		return NULL;            /* never listened on: no board to open */
	if (!sc__rundir())
		return NULL;
	pthread_mutex_lock(&board_lock);
	b = atomic_load_explicit(&sl->b, memory_order_relaxed);
	if (b) {
		/* mapped (again) meanwhile: under the lock, not being unmapped
		 * (seq_cst: the slot's hold/unmap pattern, slot_hold) */
		atomic_fetch_add_explicit(&sl->refs, 1, memory_order_seq_cst);
		slot_touch(sl);
		goto out;
	}
	fd = board_open(port, create ? O_CREAT : 0);
	if (fd < 0)
		goto out;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !sc__rundir_file_ok(&st) ||
	    (st.st_size != sizeof(*b) && (!create || st.st_size != 0 ||
					  ftruncate(fd, sizeof(*b)) < 0))) {
		close(fd);
		goto out;
	}
	if (st.st_size == 0)
		sc__rundir_file_made(fd);
	boards_trim();
	b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED) {
		b = NULL;
		close(fd);
		goto out;
	}
	/* the header is touched by every process; the offers, sparse, one
	 * page at a time (sc__offer_backed; what this process saw backed of
	 * an earlier mapping may be of a file since replaced) */
	sc__offers_backed_forget(port);
	if (sc__backed(b, offsetof(struct sc_board, offers)) < 0) {
		munmap(b, sizeof(*b));
		close(fd);
		b = NULL;
		goto out;
	}
	uint32_t zero = 0;
	/* acq_rel: the first mapper of a new file claims it; acquire on
	 * failure pairs with that claim (another process's) */
	if (atomic_compare_exchange_strong_explicit(&b->magic, &zero, SC_BOARD_MAGIC,
						    memory_order_acq_rel, memory_order_acquire)) {
		b->version = SC_BOARD_VERSION;
		b->port = port;
	} else if (zero != SC_BOARD_MAGIC) {
		munmap(b, sizeof(*b));
		close(fd);
		b = NULL;
		goto out;
	}
	close(fd);
	/* (under board_lock; ino, refs, the age before sl->b's release) */
	atomic_store_explicit(&sl->ino, (uint64_t)st.st_ino, memory_order_relaxed);
	/* seq_cst: the slot's hold/unmap pattern (slot_hold) */
	atomic_fetch_add_explicit(&sl->refs, 1, memory_order_seq_cst);
	atomic_store_explicit(&sl->used, atomic_fetch_add_explicit(&board_epoch, 1,
								   memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (nmapped < (int)(sizeof(mapped) / sizeof(mapped[0])))
		mapped[nmapped++] = port;
	atomic_store_explicit(&sl->b, b, memory_order_release);
out:
	pthread_mutex_unlock(&board_lock);
	errno = saved;
	return b;
}

static bool entry_live(struct sc_board *b, int i, bool ours);

/*
 * A listener entry's owner and prereg words: written under the board's
 * flock (entry_write, sc__board_unlisten), read without it by every
 * process that looks for a listener.  seq_cst, as they always were: a
 * reader that goes on to the entry's addresses acquires naddr (released
 * last by entry_write); the words themselves order nothing else.
 */
static uint64_t entry_owner(const struct sc_board_listener *l)
{
	return atomic_load_explicit(&l->owner, memory_order_seq_cst);
}

static bool entry_prereg(const struct sc_board_listener *l)
{
	return atomic_load_explicit(&l->prereg, memory_order_seq_cst);
}

/* fd: port's board file as named now; is b the mapping of another? */
static bool board_stale(uint16_t port, struct sc_board *b, int fd)
{
	struct stat st;
	struct board_slot *sl = &slots[port];
	/* (a description opened before a collection removed the file is of
	 * the removed one: no link left) */
	/* (relaxed: sl->b and ino change under board_lock, which the callers
	 * hold, or a caller that holds b: its hold keeps them) */
	return fd < 0 || fstat(fd, &st) < 0 || st.st_nlink == 0 ||
	       atomic_load_explicit(&sl->b, memory_order_relaxed) != b ||
	       atomic_load_explicit(&sl->ino, memory_order_relaxed) != (uint64_t)st.st_ino;
}

bool sc__board_forget(uint16_t port, struct sc_board *b)
{
	struct board_slot *sl = &slots[port];
	bool dropped = true;
	int saved = errno;

	pthread_mutex_lock(&board_lock);
	/* (relaxed: under board_lock) */
	if (atomic_load_explicit(&sl->b, memory_order_relaxed) == b) {
		/* (already replaced or unmapped: look it up again) */
		dropped = false;
		int fd = board_open(port, 0);
		int32_t zero = 0;
		if (board_stale(port, b, fd)) {
			/* seq_cst, all: as in boards_trim */
			atomic_store_explicit(&unmapping, port, memory_order_seq_cst);
			/* held by someone else of ours: left (its holders go on
			 * with it: a listener of a removed board serves nobody,
			 * a client finds no listener there) */
			if (atomic_compare_exchange_strong_explicit(&sl->refs, &zero, SLOT_DEAD,
								    memory_order_seq_cst,
								    memory_order_seq_cst)) {
				atomic_store_explicit(&sl->b, NULL, memory_order_seq_cst);
				munmap(b, sizeof(*b));
				atomic_store_explicit(&sl->refs, 0, memory_order_seq_cst);
				for (int i = 0; i < nmapped; i++)
					if (mapped[i] == port)
						mapped[i--] = mapped[--nmapped];
				dropped = true;
			}
			atomic_store_explicit(&unmapping, -1, memory_order_seq_cst);
		}
		if (fd >= 0)
			close(fd);
	}
	pthread_mutex_unlock(&board_lock);
	errno = saved;
	return dropped;
}

bool sc__board_recheck(uint16_t port)
{
	char path[320];
	struct stat st;
	int saved = errno;
	if (!board_path(port, path))
		return false;
	/* seq_cst (kept; acquire would do): stored before the release of
	 * sl->b, under board_lock (sc__board) */
	bool other = stat(path, &st) < 0 ||
		     (uint64_t)st.st_ino != atomic_load_explicit(&slots[port].ino,
								 memory_order_seq_cst);
	errno = saved;
	return other;
}

/* Let go of a board's flock and its fd.  Unlocked first, not by the
 * close: a thread's fork while we held it gave the child a copy of fd, and
 * a flock lives as long as any fd of its description (the child would hold
 * the board for good, its own listener_inherit waiting on it). */
static void flock_close(int fd)
{
	flock(fd, LOCK_UN);
	close(fd);
}

bool sc__board_collect(int dfd, const char *name, uint16_t port)
{
	int saved = errno;
	bool gone = false;
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		errno = saved;
		return false;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !sc__rundir_file_ok(&st) ||
	    st.st_size != sizeof(struct sc_board) || flock(fd, LOCK_EX | LOCK_NB) < 0)
		goto out;
	struct sc_board *b = mmap(NULL, offsetof(struct sc_board, connecting), PROT_READ,
				  MAP_SHARED, fd, 0);
	if (b == MAP_FAILED)
		goto out;
	/* acquire: pairs with the claim in sc__board */
	bool live = atomic_load_explicit(&b->magic, memory_order_acquire) != SC_BOARD_MAGIC ||
		    b->port != port;    /* not a board of ours as we know it: left */
	for (int i = 0; i < SC_BOARD_LISTENERS && !live; i++)
		live = entry_owner(&b->listeners[i]) && entry_live(b, i, false);
	munmap(b, offsetof(struct sc_board, connecting));
	/* under the flock: a listener writes its entry under it, then checks
	 * that the file it wrote in is still the port's (sc__board_listen) */
	if (!live)
		gone = unlinkat(dfd, name, 0) == 0;
out:
	flock_close(fd);
	errno = saved;
	return gone;
}

void sc__board_put(uint16_t port)
{
	/* (release: our use of the board comes before its unmapping) */
	atomic_fetch_sub_explicit(&slots[port].refs, 1, memory_order_release);
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

/* board flock held: our lock description of b's file (opened on first use;
 * again if the one we have is of a board removed since: our locks there
 * are of entries long dead, or the board would not have been removed) */
static int lock_fd_locked(uint16_t port)
{
	struct stat st;
	if (board_lkfd[port] && (fstat(board_lkfd[port] - 1, &st) < 0 ||
				 (uint64_t)st.st_ino != atomic_load_explicit(&slots[port].ino,
									     memory_order_seq_cst))) {
		close(board_lkfd[port] - 1);
		board_lkfd[port] = 0;
	}
	if (!board_lkfd[port]) {
		int fd = sc__fd_park(board_open(port, 0));
		if (fd < 0)
			return -1;
		board_lkfd[port] = fd + 1;
		bool known = false;
		for (int k = 0; k < n_lk_ports; k++)
			known |= lk_ports[k] == port;
		if (!known && n_lk_ports < (int)(sizeof(lk_ports) / sizeof(lk_ports[0])))
			lk_ports[n_lk_ports++] = port;
	}
	return board_lkfd[port] - 1;
}

/* (lk_lock held across it) */
static int lock_fd(struct sc_board *b)
{
	pthread_mutex_lock(&lk_lock);
	int fd = lock_fd_locked((uint16_t)b->port);
	pthread_mutex_unlock(&lk_lock);
	return fd;
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
 * lock held, seen through a description of the board file of its own: not
 * our lock's, where our own locks would not show).  ours: b is our slot's
 * mapping, which must be of the file the port's board is now (one removed
 * by a collection serves nobody: the locks looked at are the new file's) */
static bool entry_live_how(struct sc_board *b, int i, bool ours, bool *by_lock);

static bool entry_live(struct sc_board *b, int i, bool ours)
{
	bool by_lock;
	return entry_live_how(b, i, ours, &by_lock);
}

/* entry_live; *by_lock: the verdict is the lock's (not a stale mapping's,
 * a parent's for its child, or a guess without a description) */
static bool entry_live_how(struct sc_board *b, int i, bool ours, bool *by_lock)
{
	struct sc_board_listener *l = &b->listeners[i];
	uint64_t owner = entry_owner(l);
	*by_lock = false;
	if (!owner)
		return false;
	int fd = board_open((uint16_t)b->port, 0);
	if (ours && (fd >= 0 || errno == ENOENT) && board_stale((uint16_t)b->port, b, fd)) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	if (entry_prereg(l)) {
		/* written by a parent for its child, not taken over yet:
		 * live while the parent is */
		if (fd >= 0)
			close(fd);
		return sc__proc_alive(owner);
	}
	struct flock fl = entry_range(i, F_WRLCK);
	int rc = fd < 0 ? -1 : fcntl(fd, F_OFD_GETLK, &fl);
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return sc__proc_alive(owner);        /* no description: the process must do */
	*by_lock = true;
	return fl.l_type != F_UNLCK;
}

void sc__board_atfork_child(void)
{
	/* a thread of the parent's may have been unmapping a board: still
	 * named, it is still mapped (the pointer goes first); gone, it is
	 * the parent's unmapping (or left to us, mapped but unnamed) */
	sc__mutex_reset(&board_lock);
	sc__mutex_reset(&lk_lock);
	/* (relaxed: the fork child's only thread; what the parent's thread
	 * stored before the fork is in the copy) */
	int p = atomic_load_explicit(&unmapping, memory_order_relaxed);
	if (p >= 0)
		atomic_store_explicit(&unmapping, -1, memory_order_relaxed);
	if (p >= 0 && atomic_load_explicit(&slots[p].refs, memory_order_relaxed) == SLOT_DEAD)
		atomic_store_explicit(&slots[p].refs, 0, memory_order_relaxed);
	for (int k = 0; k < n_lk_ports; k++) {
		uint16_t port = lk_ports[k];
		if (board_lkfd[port])
			close(board_lkfd[port] - 1);
		board_lkfd[port] = 0;
	}
	SC_RESET(n_lk_ports, 0);
}

/* Write listener entry t for the process of identity owner (board flock
 * held): into the entry it already has for that socket, or a free or dead
 * one.  Our own entry is locked; a prereg one (written by a parent for
 * its child kid) is not, and is live while its owner, the parent, is. */
/* board flock held: entry l is the owner's now, as t says */
static void entry_write(struct sc_board_listener *l, uint64_t owner, int32_t kid, bool prereg,
			const struct sc_board_listener *t)
{
	atomic_store_explicit(&l->naddr, 0, memory_order_relaxed);
	/* seq_cst: entry_owner and entry_prereg's readers (kept) */
	atomic_store_explicit(&l->owner, owner, memory_order_seq_cst);
	atomic_store_explicit(&l->prereg, prereg ? 1u : 0u, memory_order_seq_cst);
	l->kid = kid;
	l->netns = t->netns;
	l->sock_ino = t->sock_ino;
	l->wildcard = t->wildcard;
	/* (a hint: relaxed, as sc__board_defers reads it) */
	atomic_store_explicit(&l->deferred,
			      atomic_load_explicit(&t->deferred, memory_order_relaxed),
			      memory_order_relaxed);
	memcpy(l->addr, t->addr, sizeof(l->addr));
	/* naddr last, release: a reader sees the addresses complete (pairs
	 * with the acquire in sc__board_serves and sc__board_defers) */
	atomic_store_explicit(&l->naddr, atomic_load_explicit(&t->naddr, memory_order_relaxed),
			      memory_order_release);
}

static int board_put(struct sc_board *b, uint64_t owner, int32_t kid, bool prereg,
		     const struct sc_board_listener *t)
{
	if (!owner)
		return -ENOSPC;
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		uint64_t p = entry_owner(l);
		bool same = p == owner && l->sock_ino == t->sock_ino && l->kid == kid &&
			    !entry_prereg(l) == !prereg;
		if (p && !same && entry_live(b, i, true))
			continue;
		if (!prereg && entry_lock(b, i, F_WRLCK) < 0) {
			if (errno == EAGAIN || errno == EACCES)
				continue;       /* held: live after all */
			return -errno;
		}
		entry_write(l, owner, kid, prereg, t);
		return 0;
	}
	return -ENOSPC;
}

int sc__board_listen(struct sc_board *b, const struct sc_addr16 *addr, uint64_t sock_ino,
		     bool deferred)
{
	int fd = board_open((uint16_t)b->port, 0), rc, saved = errno;
	struct sc_board_listener t = { .netns = sc__netns(), .sock_ino = sock_ino,
				       .wildcard = sc__addr_is_any(addr), .deferred = deferred };

	/* (t is ours, on the stack: relaxed) */
	uint32_t n = 1;
	if (t.wildcard)
		n = (uint32_t)local_addrs(t.addr, SC_BOARD_ADDRS);
	else
		t.addr[0] = *addr;
	if (!n)
		n = SC_BOARD_ADDRS + 1;   /* wildcard, loopback only */
	atomic_store_explicit(&t.naddr, n, memory_order_relaxed);
	if (fd < 0) {
		rc = errno == ENOENT ? -ESTALE : -errno;        /* removed */
		errno = saved;
		return rc;
	}
	flock(fd, LOCK_EX);
	/* the file we lock is the one we write in: not one removed by a
	 * collection since we mapped it (it holds no live entry then) */
	rc = board_stale((uint16_t)b->port, b, fd) ? -ESTALE :
	     board_put(b, sc__self(), sc__pid(), false, &t);
	flock_close(fd);
	errno = saved;
	return rc;
}

int sc__board_listen_inherit(struct sc_board *b, uint64_t sock_ino, uint64_t parent,
			     int32_t kid, bool in_child)
{
	int fd = board_open((uint16_t)b->port, 0), rc = -ENOENT, saved = errno;

	if (fd < 0) {
		rc = -errno;
		errno = saved;
		return rc;
	}
	flock(fd, LOCK_EX);
	struct sc_board_listener *from = NULL, *pre = NULL, *kids = NULL;
	for (int i = 0; i < SC_BOARD_LISTENERS && parent; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		uint64_t o = entry_owner(l);
		if (!o || l->sock_ino != sock_ino)
			continue;
		bool p = entry_prereg(l);
		if (o == parent && !p)
			from = l;
		else if (o == parent && p && l->kid == kid)
			pre = l;
		else if (o != parent && !p && l->kid == kid && entry_live(b, i, true))
			kids = l;       /* the child's own, written first */
	}
	if (!in_child) {
		/* for the child, until it takes it over */
		rc = kids || pre ? 0 : from ? board_put(b, parent, kid, true, from) : -ENOENT;
	} else if (pre) {
		/* take the parent's entry for us over: locked, ours */
		int i = (int)(pre - b->listeners);
		rc = entry_lock(b, i, F_WRLCK) < 0 ? -errno : 0;
		if (!rc) {
			struct sc_board_listener t;
			memcpy(&t, pre, sizeof(t));
			entry_write(pre, sc__self(), kid, false, &t);
		}
	} else if (from) {
		struct sc_board_listener t;
		memcpy(&t, from, sizeof(t));
		rc = board_put(b, sc__self(), kid, false, &t);
	}
	flock_close(fd);
	errno = saved;
	return rc;
}

void sc__board_defer(struct sc_board *b, uint64_t sock_ino, bool deferred)
{
	int fd = board_open((uint16_t)b->port, 0), saved = errno;

	/* (under the flock: an entry being copied for a fork child, or
	 * written afresh, gets the new value) */
	if (fd >= 0)
		flock(fd, LOCK_EX);
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		if (entry_owner(l) && l->sock_ino == sock_ino)
			atomic_store_explicit(&l->deferred, deferred, memory_order_relaxed);
	}
	if (fd >= 0)
		flock_close(fd);
	errno = saved;
}

void sc__board_unlisten(struct sc_board *b, uint64_t sock_ino)
{
	int fd = board_open((uint16_t)b->port, 0), saved = errno;
	uint64_t me = sc__self();

	/* (no file: the lock of our entry still goes) */
	if (fd >= 0)
		flock(fd, LOCK_EX);
	for (int i = 0; i < SC_BOARD_LISTENERS && me; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		/* (not those we wrote for a child: they are its) */
		if (entry_owner(l) == me && l->sock_ino == sock_ino &&
		    !entry_prereg(l)) {
			/* seq_cst: entry_owner's readers (kept) */
			atomic_store_explicit(&l->owner, 0, memory_order_seq_cst);
			entry_lock(b, i, F_UNLCK);
		}
	}
	if (fd >= 0)
		flock_close(fd);
	errno = saved;
}

/* A listener entry found live is believed so for LIVE_MS: every connect
 * asked the kernel (an OFD lock test walks the file's locks: ~8 us, a
 * tenth of a short connection's cost).  A listener that died in that
 * window costs a client that one wait for a claim that does not come,
 * which looks again (pending_settle).  Direct-mapped by port and entry: a
 * word holds port, entry and the time it was seen live. */
#define LIVE_MS 10u
static _Atomic uint64_t live_seen[64];
/* An entry its lock showed dead is believed dead for DEAD_MS while it
 * names the same owner and socket: the owner's lock goes with its process
 * or its listening socket, and an entry written anew names another owner
 * or socket (one way back for the same pair, the socket passed back to
 * its owner and accepted on, is seen within DEAD_MS).  A server that
 * forks per connection leaves such entries (its first children's, a
 * parent's that closed its copy), and every connect looked at them again:
 * an open, an fstat and a lock test each.  A word per port and entry:
 * 40 bits of a hash of owner, socket and place (a collision can only put
 * a connection on TCP), 24 of the time it was seen, in ms. */
#define DEAD_MS 1000u
#define DEAD_TIME ((1ull << 24) - 1)
static _Atomic uint64_t dead_seen[64];

static uint64_t dead_key(struct sc_board *b, int i)
{
	struct sc_board_listener *l = &b->listeners[i];
	uint64_t z = entry_owner(l) ^ l->sock_ino * 0x9e3779b97f4a7c15ull ^
		     ((uint64_t)b->port << 8 | (uint64_t)i) << 40;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) & ~DEAD_TIME;
}

static bool entry_live_cached(struct sc_board *b, int i)
{
	uint64_t key = (uint64_t)b->port << 8 | (uint64_t)i;
	unsigned slot = (b->port * 31u + (unsigned)i) & 63;
	_Atomic uint64_t *w = &live_seen[slot];
	uint64_t now = sc__board_ms(), v = atomic_load_explicit(w, memory_order_relaxed);
	if (v >> 40 == key && now - (v & ((1ull << 40) - 1)) < LIVE_MS)
		return true;
	uint64_t dk = dead_key(b, i);
	uint64_t d = atomic_load_explicit(&dead_seen[slot], memory_order_relaxed);
	if ((d & ~DEAD_TIME) == dk && ((now - d) & DEAD_TIME) < DEAD_MS)
		return false;
	bool by_lock;
	if (!entry_live_how(b, i, true, &by_lock)) {
		/* (relaxed: a hint of this process's own; the key is
		 * recomputed, so an entry rewritten meanwhile is not) */
		if (by_lock && dead_key(b, i) == dk)
			atomic_store_explicit(&dead_seen[slot], dk | (now & DEAD_TIME),
					      memory_order_relaxed);
		return false;
	}
	atomic_store_explicit(w, key << 40 | (now & ((1ull << 40) - 1)), memory_order_relaxed);
	return true;
}

/* Does listener entry l (written: naddr n) take connections to dst? */
static bool entry_serves(struct sc_board_listener *l, uint32_t n, const struct sc_addr16 *dst,
			 bool loop)
{
	bool yes = false;
	if (n > SC_BOARD_ADDRS)
		n = 0;  /* wildcard with no address besides loopback */
	if (loop) {
		/* 127.0.0.1 in another namespace is another host */
		if (l->netns != sc__netns())
			return false;
		if (l->wildcard || sc__addr_is_loopback(&l->addr[0]))
			yes = !memcmp(&l->addr[0], dst, 16) || l->wildcard;
	} else {
		for (uint32_t k = 0; k < n && !yes; k++)
			yes = !memcmp(&l->addr[k], dst, 16);
	}
	return yes;
}

bool sc__board_serves(struct sc_board *b, const struct sc_addr16 *dst)
{
	bool loop = sc__addr_is_loopback(dst);
	int saved = errno;
	bool yes = false;

	for (int i = 0; i < SC_BOARD_LISTENERS && !yes; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		uint64_t owner = entry_owner(l);
		/* acquire: pairs with the release in entry_write */
		uint32_t n = atomic_load_explicit(&l->naddr, memory_order_acquire);
		if (!owner || !n)
			continue;
		yes = entry_serves(l, n, dst, loop);
		if (yes && !entry_live_cached(b, i))
			yes = false;    /* gone: killed, exec'd, or a zombie */
	}
	errno = saved;
	return yes;
}

bool sc__board_defers(struct sc_board *b, const struct sc_addr16 *dst)
{
	bool loop = sc__addr_is_loopback(dst);

	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b->listeners[i];
		if (!atomic_load_explicit(&l->deferred, memory_order_relaxed) ||
		    !entry_owner(l))
			continue;
		/* acquire: pairs with the release in entry_write */
		uint32_t n = atomic_load_explicit(&l->naddr, memory_order_acquire);
		if (n && entry_serves(l, n, dst, loop))
			return true;
	}
	return false;
}

uint64_t sc__board_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- connecting clients --------------------------------------------------
 *
 * A client takes a slot before its connect() and frees it once its offer is
 * posted: microseconds, unless it is descheduled (on a crowded machine,
 * for longer than 200 ms: an acceptor that stopped waiting then declined a
 * live client).  A slot older than SLOT_STALE_MS is not waited for (its
 * client was killed in between, or is stopped), and another client may
 * take it; the acceptor's own bound (offer_await) limits each wait.
 */
#define SLOT_STALE_MS 1000u

/* Our token in connecting slots: of our identity, never 0 (a slot names
 * no process for anything but freeing it: a slot older than
 * SLOT_STALE_MS is anyone's). */
static uint32_t connecting_token(void)
{
	uint64_t id = sc__self();
	return (uint32_t)(id ^ id >> 32) | 1u;
}

#define SLOT_WORD(who, t_ms) ((uint64_t)(t_ms) << 32 | (who))

/* How long ago slot word w was taken, as of now: a time later than our
 * now (taken after we read the clock) is 0, not a wrapped-around age. */
static uint32_t slot_age(uint64_t w, uint32_t now)
{
	int32_t age = (int32_t)(now - (uint32_t)(w >> 32));
	return age > 0 ? (uint32_t)age : 0;
}

int sc__board_connecting(struct sc_board *b)
{
	uint32_t me = connecting_token();
	uint32_t now = (uint32_t)sc__board_ms();
	for (int i = 0; i < SC_BOARD_CONNECTING; i++) {
		_Atomic uint64_t *c = &b->connecting[i].word;
		uint64_t p = atomic_load_explicit(c, memory_order_relaxed);
		if ((uint32_t)p && slot_age(p, now) < SLOT_STALE_MS)
			continue;
		/* seq_cst (kept): taken, with its time, before our
		 * connect()'s SYN, which the acceptor sees before its
		 * sc__board_anyone_connecting */
		if (atomic_compare_exchange_strong_explicit(c, &p, SLOT_WORD(me, now),
							    memory_order_seq_cst,
							    memory_order_relaxed))
			return i;
	}
	return -1;
}

void sc__board_connected(struct sc_board *b, int slot)
{
	if (slot >= 0 && slot < SC_BOARD_CONNECTING) {
		uint32_t me = connecting_token();
		_Atomic uint64_t *c = &b->connecting[slot].word;
		uint64_t w = atomic_load_explicit(c, memory_order_relaxed);
		/* ours still (a stale slot may have been taken over) */
		/* seq_cst (release at least): our offer, posted, before the
		 * free; pairs with the acquire in sc__board_anyone_connecting */
		while ((uint32_t)w == me &&
		       !atomic_compare_exchange_weak_explicit(c, &w, 0, memory_order_seq_cst,
							      memory_order_relaxed))
			;
	}
}

bool sc__board_anyone_connecting(struct sc_board *b)
{
	uint32_t now = (uint32_t)sc__board_ms();
	for (int i = 0; i < SC_BOARD_CONNECTING; i++) {
		uint64_t w = atomic_load_explicit(&b->connecting[i].word, memory_order_acquire);
		if ((uint32_t)w && slot_age(w, now) < SLOT_STALE_MS)
			return true;
	}
	return false;
}
