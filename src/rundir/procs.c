/* SPDX-License-Identifier: MIT */
/*
 * Processes of the run directory: each one's identity, and whether it is
 * alive, the same whatever PID namespace asks.
 *
 * A process that takes part in a connection (offers, claims, listens,
 * keeps a rendezvous socket or a stats file) takes a slot of
 * <rundir>/procs-v1 and holds a POSIX record lock (F_SETLK) on the slot's
 * first byte.  Its identity is the slot's index and a random generation
 * (56 bits, never 0); it is alive while the lock is held: the kernel drops
 * a process's record locks when it ends, however it ends (killed, a zombie
 * not reaped yet has closed its files), and at an exec (our description is
 * close-on-exec, and closing it drops them), and answers F_GETLK the same
 * in every PID namespace.  A pid is only shown to people: every
 * container's first process is pid 1, and pids repeat across namespaces
 * (a client in one container would take pid 1, the server in another, for
 * alive, and wait for ever).
 *
 * Record locks, not OFD locks: a fork child does not inherit them.  An OFD
 * lock goes with its open file description, which a fork child holds too
 * (its fd, and any mapping of the file) until it closes it: a process
 * killed just after it forked was alive until its child first ran, and a
 * peer closing the connection they shared freed it on shared memory
 * instead of switching it for the child (sem_fork_owner_killed_close, 8
 * runs in 20 under load).  The record-lock rule that closing any fd of a
 * file drops the process's locks on it is kept: the table is mapped
 * through a description closed before any lock is taken, and our one
 * description of it is never closed but by exec.
 *
 * A fork child gets an identity of its own when it first needs one (a
 * child that only serves the connection its parent accepted needs none),
 * through the description it inherited.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rundir.h"
#include "sys.h"
#include "forkreset.h"

#define PROCS_SIZE ((size_t)SC_PROCS * sizeof(struct sc_proc))

/* The table, mapped once (a fork child keeps the mapping: it is the same
 * file). */
static struct sc_proc *_Atomic procs;
/* Our description of the table (-1: none yet; a fork child goes on with
 * its parent's): our slot's record lock is taken through it, and looks at
 * others' slots go through it too (our own lock hides no one else's).
 * Never closed: closing any description of the file would drop our lock. */
static int procs_fd = -1;
static uint64_t procs_ino;      /* the table's inode (procs_fd's, checked) */
/* Our identity (0: none yet); written under self_lock, read without. */
static _Atomic uint64_t self;
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER; /* order: docs/interposer.md §6b */
SC_LOCK_RANK(self_lock, LO_SELF)

static struct flock slot_lock(uint32_t i, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = (off_t)((size_t)i * sizeof(struct sc_proc)), .l_len = 1 };
	return fl;
}

/* A new description of the table, checked as every run-directory file is
 * (ours, or the shared group's: sc__rundir_file_ok), or -1. */
static int procs_file(void)
{
	const char *d = sc__rundir();
	char path[320];
	struct stat st;

	if (!d)
		return -1;
	snprintf(path, sizeof(path), "%s/" SC_PROCS_FILE, d);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, sc__rundir_file_mode());
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !sc__rundir_file_ok(&st) ||
	    (st.st_size != (off_t)PROCS_SIZE &&
	     (st.st_size != 0 || ftruncate(fd, (off_t)PROCS_SIZE) < 0))) {
		close(fd);
		return -1;
	}
	if (st.st_size == 0)
		sc__rundir_file_made(fd);
	return fd;
}

/* self_lock held: our description of the table, for our lock and our
 * looks (the table mapped first, if it is not yet, through a description
 * of its own closed at once: before any lock is held, since closing it
 * drops them), or -1. */
static int procs_open(void)
{
	if (!atomic_load_explicit(&procs, memory_order_acquire)) {
		int mfd = procs_file();
		if (mfd < 0)
			return -1;
		void *m = mmap(NULL, PROCS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		close(mfd);
		if (m == MAP_FAILED)
			return -1;
		atomic_store_explicit(&procs, (struct sc_proc *)m, memory_order_release);
	}
	int fd = procs_file();
	struct stat st;
	if (fd >= 0 && fstat(fd, &st) == 0)
		procs_ino = (uint64_t)st.st_ino;
	return fd < 0 ? -1 : sc__fd_park(fd);  /* (kept: out of the program's numbers) */
}

static uint64_t random_u64(void)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = sc__now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)sc__pid() << 32;
	return r;
}

static uint64_t ns_ino(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Fill slot i (locked) as process pid's and publish id.  The
 * id goes to 0 first: a reader copying the slot (sc__proc_info) sees it
 * change and retries. */
static void slot_fill(uint32_t i, uint64_t id, int32_t pid)
{
	struct sc_proc *p = &atomic_load_explicit(&procs, memory_order_acquire)[i];
	atomic_store_explicit(&p->id, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);      /* the 0 before the fields */
	p->pid = pid;
	p->uid = (uint32_t)geteuid();
	p->pidns = ns_ino("/proc/self/ns/pid");
	p->netns = sc__netns();
	memset(p->comm, 0, sizeof(p->comm));
	prctl(PR_GET_NAME, p->comm, 0, 0, 0);
	/* release: the fields before the id (pairs with sc__proc_info's
	 * acquire) */
	atomic_store_explicit(&p->id, id, memory_order_release);
}

/* A free slot locked (through fd, as this process's), its identity filled
 * for pid: 0 if none. */
static uint64_t slot_take(int fd, int32_t pid)
{
	struct sc_proc *t = atomic_load_explicit(&procs, memory_order_acquire);
	uint64_t r = random_u64();
	uint32_t start = (uint32_t)r % SC_PROCS;

	for (uint32_t k = 0; k < SC_PROCS; k++) {
		uint32_t i = (start + k) % SC_PROCS;
		struct flock fl = slot_lock(i, F_WRLCK);
		if (fcntl(fd, F_SETLK, &fl) < 0) {
			if (errno == EAGAIN || errno == EACCES)
				continue;       /* a live process's */
			return 0;
		}
		/* its page allocated before the first store (a full tmpfs
		 * raises SIGBUS on a store into a hole) */
		if (sc__backed(&t[i], sizeof(t[i])) < 0) {
			fl.l_type = F_UNLCK;
			fcntl(fd, F_SETLK, &fl);
			return 0;
		}
		uint64_t gen = (r >> 16) & ((1ull << 40) - 1);
		if (!gen)
			gen = 1;
		uint64_t id = gen << 16 | i;
		slot_fill(i, id, pid);
		return id;
	}
	return 0;
}

uint64_t sc__self(void)
{
	uint64_t id = atomic_load_explicit(&self, memory_order_acquire);
	if (id)
		return id;
	int saved = errno;
	pthread_mutex_lock(&self_lock);
	id = atomic_load_explicit(&self, memory_order_relaxed);
	if (!id) {
		if (procs_fd < 0)
			procs_fd = procs_open();
		if (procs_fd >= 0)
			id = slot_take(procs_fd, sc__pid());
		atomic_store_explicit(&self, id, memory_order_release);
	}
	pthread_mutex_unlock(&self_lock);
	errno = saved;
	return id;
}

uint64_t sc__self_peek(void)
{
	return atomic_load_explicit(&self, memory_order_acquire);
}

/* A description to look through: ours, or one opened for looking (a
 * process with no identity: `shortcut stats`). */
static int look_fd(void)
{
	if (procs_fd >= 0)
		return procs_fd;
	pthread_mutex_lock(&self_lock);
	if (procs_fd < 0)
		procs_fd = procs_open();
	pthread_mutex_unlock(&self_lock);
	return procs_fd;
}

int sc__procs_fd(void)
{
	return procs_fd;
}

/* Our description, still the table's?  A program that closed it
 * (closefrom in a child, say) and perhaps reused its number: a look
 * through it would see nobody (EBADF, or another file's locks).  Made
 * anew, and our identity's lock taken again (closing it dropped it) if
 * our slot is still ours.  false if no description can be had. */
static bool procs_fd_check(void)
{
	struct stat st;
	pthread_mutex_lock(&self_lock);
	bool ok = procs_fd >= 0 && fstat(procs_fd, &st) == 0 && procs_ino &&
		  (uint64_t)st.st_ino == procs_ino;
	if (!ok) {
		procs_fd = procs_open();
		ok = procs_fd >= 0;
		uint64_t id = atomic_load_explicit(&self, memory_order_relaxed);
		struct sc_proc *t = atomic_load_explicit(&procs, memory_order_acquire);
		/* acquire: pairs with slot_fill's release of the id (a
		 * comparison only: is the slot still ours?) */
		if (ok && id && t &&
		    atomic_load_explicit(&t[id & 0xffff].id, memory_order_acquire) == id) {
			struct flock fl = slot_lock((uint32_t)(id & 0xffff), F_WRLCK);
			if (fcntl(procs_fd, F_SETLK, &fl) < 0)
				atomic_store_explicit(&self, 0, memory_order_release);
		}
	}
	pthread_mutex_unlock(&self_lock);
	return ok;
}

bool sc__proc_alive(uint64_t id)
{
	if (!id || (id & ~SC_PROC_ID_MASK))
		return false;
	if (id == atomic_load_explicit(&self, memory_order_acquire))
		return true;
	int saved = errno;
	int fd = look_fd();
	struct sc_proc *t = atomic_load_explicit(&procs, memory_order_acquire);
	bool alive = false;
	if (fd >= 0 && t) {
		uint32_t i = (uint32_t)(id & 0xffff);
		struct flock fl = slot_lock(i, F_WRLCK);
		/* the slot names it before and after the look: a process
		 * that took the slot meanwhile holds the lock for itself
		 * (it writes its id only after taking the lock, so a look
		 * in between may still call the dead one alive, once) */
		alive = atomic_load_explicit(&t[i].id, memory_order_acquire) == id &&
			fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK &&
			atomic_load_explicit(&t[i].id, memory_order_acquire) == id;
		/* dead, or our description gone (a program's close_range):
		 * a dead verdict is made sure of through one that is the
		 * table's */
		if (!alive && atomic_load_explicit(&t[i].id, memory_order_acquire) == id &&
		    procs_fd_check()) {
			fl = slot_lock(i, F_WRLCK);
			alive = fcntl(procs_fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK &&
				atomic_load_explicit(&t[i].id, memory_order_acquire) == id;
		}
	}
	errno = saved;
	return alive;
}

int sc__proc_info(uint64_t id, struct sc_proc *out)
{
	if (!id || (id & ~SC_PROC_ID_MASK) || look_fd() < 0)
		return -ESRCH;
	struct sc_proc *p = &atomic_load_explicit(&procs, memory_order_acquire)[id & 0xffff];
	for (int tries = 0; tries < 100; tries++) {
		if (atomic_load_explicit(&p->id, memory_order_acquire) != id)
			return -ESRCH;
		out->pid = p->pid;
		out->uid = p->uid;
		out->pidns = p->pidns;
		out->netns = p->netns;
		memcpy(out->comm, p->comm, sizeof(out->comm));
		out->comm[sizeof(out->comm) - 1] = 0;
		/* (a seqlock's read side: the copy before the second look) */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&p->id, memory_order_relaxed) == id) {
			atomic_store_explicit(&out->id, id, memory_order_relaxed);
			return 0;
		}
	}
	return -ESRCH;
}

void sc__proc_atfork_child(void)
{
	/* our parent's lock is not ours (record locks are not inherited);
	 * its description is, and serves us as well (closing it would drop
	 * nothing of the parent's, but nothing needs closing) */
	sc__mutex_reset(&self_lock);
	SC_RESET_ATOMIC(self, 0);
}

int sc__procs_live(struct sc_proc *out, int max)
{
	struct sc_proc *t = atomic_load_explicit(&procs, memory_order_acquire);
	int n = 0;
	if (look_fd() < 0 || !(t = atomic_load_explicit(&procs, memory_order_acquire)))
		return 0;
	for (uint32_t i = 0; i < SC_PROCS && n < max; i++) {
		uint64_t id = atomic_load_explicit(&t[i].id, memory_order_acquire);
		if (id && sc__proc_alive(id) && sc__proc_info(id, &out[n]) == 0)
			n++;
	}
	return n;
}
