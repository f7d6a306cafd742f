/* SPDX-License-Identifier: MIT */
/*
 * A client's close is the passive one, as over kernel TCP.
 *
 * The side whose FIN leaves first keeps the connection's TIME_WAIT.  Over
 * kernel TCP that is usually the server (its close follows its answer,
 * while the client still has to be woken to read it); on shared memory the
 * client reads the answer without the kernel and closes first, so the
 * TIME_WAIT was its own: every later connect() to that server stepped over
 * those ports (on one CPU a connection on shared memory cost twice what it
 * does now, docs/profile.md), and where the kernel may not reuse them
 * (tcp_tw_reuse, a veth between containers) a client faster than its ports
 * ran out of them.
 *
 * So when the program closes a connection it made on shared memory, with
 * a plain ending (no reset), we keep its kernel socket (a dup of ours,
 * out of the program's way) until the server's FIN: our close then
 * answers it, and the TIME_WAIT is the server's.  What waits is looked
 * at (a peek for the FIN, only once the server's side says it closed, or
 * died) at our next connect() to an accelerated listener, before the
 * kernel picks a port, and by the control thread every 50 ms while one
 * waits (sc__tick_hook: it is not woken per close).  One whose server has
 * not closed after LG_MS closes anyway (the TIME_WAIT is ours then, as
 * before).  No fd of ours but the dups: nothing kept for the process's
 * life.  LG_MAX at most; a fork child closes its
 * copies (its parent's close must not wait for them); close_range() leaves
 * them out (linger_in).
 *
 * The connection's slot is kept as long (sc__close_begin, then
 * sc__conn_release): a server that switches the connection back to TCP
 * after our close (an exec, `shortcut off`) reads the kernel socket from
 * then on, and what we had sent that it never read is re-sent on ours,
 * then our FIN -- lost before, when our close had freed the ring and sent
 * the FIN already.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "forkreset.h"
#include "link.h"
#include "lockorder.h"
#include "rundir.h"
#include "stats.h"
#include "interposer.h"

#define LG_MAX     64
#define LG_MS      1000         /* the longest a kernel socket waits for the FIN */
#define LG_RESEND_MS 30000      /* a re-send waits this long for the peer to read */

struct lg_entry {
	int fd;                 /* our dup of the kernel socket */
	bool reusable;          /* may the kernel reuse its port in TIME_WAIT? */
	bool busy;              /* a re-send thread has it (lg_resend) */
	struct sc_conn *c;      /* closed (sc__close_begin), its slot still ours */
	uint64_t until;         /* ns: closed regardless after this */
};

/* An entry closed: what is left to do without the lock. */
struct lg_done {
	struct sc_conn *c;
	bool passive, reusable;
};

static pthread_mutex_t lg_lock = PTHREAD_MUTEX_INITIALIZER;    /* order: docs/interposer.md §6b */
SC_LOCK_RANK(lg_lock, LO_LINGER)
static struct lg_entry lg[LG_MAX];
static _Atomic int lg_n;        /* entries in lg (written under lg_lock) */
static _Atomic uint64_t lg_takes;       /* entries ever made */

/* A client's close found its kernel socket closing first: counted, and
 * where its port cannot be reused, charged to the ports (tw_spent). */
void lg_gave_up(bool reusable)
{
	SC_STAT_ADD(closes_active, 1);
	if (!reusable)
		tw_spent();
}

/* lg_lock held: close entry i and take it out of the list (the last takes
 * its place).  Every dup of ours is listed until it is closed, and the
 * list changes under the lock fork() holds (linger_fork): a fork child
 * closes exactly the dups it inherited.  Its slot is let go later. */
static struct lg_done lg_close(int i, bool passive)
{
	struct lg_done d = { .c = lg[i].c, .passive = passive, .reusable = lg[i].reusable };
	if (lg[i].fd >= 0)
		R(close)(lg[i].fd);
	int n = atomic_load_explicit(&lg_n, memory_order_relaxed) - 1;
	lg[i] = lg[n];
	atomic_store_explicit(&lg_n, n, memory_order_relaxed);
	return d;
}

/* No lock of ours held: counted, the slot let go (the group's lock). */
static void lg_done(const struct lg_done *d)
{
	if (d->passive)
		SC_STAT_ADD(closes_passive, 1);
	else
		lg_gave_up(d->reusable);
	sc__conn_release(d->c);
}

/* lg_lock held: entry of fd, or -1. */
static int lg_find(int fd)
{
	for (int i = 0; i < atomic_load_explicit(&lg_n, memory_order_relaxed); i++)
		if (lg[i].fd == fd)
			return i;
	return -1;
}

/* The peer switched the connection to TCP after our close: what it never
 * read of ours goes on the kernel socket, then our FIN; then the peer's
 * FIN is waited for as before. */
static void lg_resend_run(struct lg_entry *e)
{
	uint64_t from, to;
	if (sc__switch_range(e->c, &from, &to) && from != to &&
	    sw_resend(e->fd, e->c, from, to, LG_RESEND_MS))
		LOG(1, "switch to TCP after our close: bytes the peer had not read are lost");
	R(shutdown)(e->fd, SHUT_WR);
	struct pollfd p = { .fd = e->fd, .events = POLLRDHUP };
	bool fin = R(poll)(&p, 1, LG_MS) == 1;
	pthread_mutex_lock(&lg_lock);
	int i = lg_find(e->fd);
	struct lg_done d = i >= 0 ? lg_close(i, fin) : (struct lg_done){ .c = NULL };
	pthread_mutex_unlock(&lg_lock);
	if (d.c)
		lg_done(&d);
}

static void *lg_resend_main(void *arg)
{
	lg_resend_run(arg);
	free(arg);
	return NULL;
}

/* A thread of its own for it (the peer must read for it to go). */
static void lg_resend(struct lg_entry e)
{
	struct lg_entry *h = malloc(sizeof(*h));
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	if (!h) {
		lg_resend_run(&e);
		return;
	}
	*h = e;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, &a, lg_resend_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc)
		lg_resend_main(h);
}

/* Has the peer's FIN (or its reset) come on fd?  1 yes, 0 not yet, -1
 * not a socket of ours any more (the program closed every fd, say). */
static int lg_fin(int fd)
{
	char b;
	ssize_t n = R(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT)))
		return 1;
	if (n < 0 && (errno == EBADF || errno == ENOTSOCK))
		return -1;
	return 0;       /* EAGAIN, or bytes (the peer writes on TCP after a switch) */
}

/* lg_lock held: close the entries done -- the peer's FIN come, past their
 * time (or all) -- into out[], and hand those the peer switched to
 * re-send threads (into resend[]: busy from now on); how many of each. */
static int lg_collect(bool all, struct lg_done *out, struct lg_entry *resend, int *nresend)
{
	int k = 0;
	uint64_t now = all ? UINT64_MAX : sc__now_ns();
	for (int i = atomic_load_explicit(&lg_n, memory_order_relaxed) - 1; i >= 0; i--) {
		if (lg[i].busy)
			continue;
		struct sc_conn *c = lg[i].c;
		/* acquire: the peer's cursor before its FROZEN */
		uint32_t pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire);
		bool frozen = pf & SC_SF_FROZEN;
		bool ended = (pf & (SC_SF_CLOSED | SC_SF_ABORT | SC_SF_RELEASED)) ||
			     sc__conn_err(c) || (sc__conn_lflags(c) & SC_LF_PEER_GONE);
		bool late = lg[i].until <= now;
		if (frozen && !all) {   /* (at exit: no thread to wait for) */
			lg[i].busy = true;
			resend[(*nresend)++] = lg[i];
			continue;
		}
		if (!frozen && !ended && !late)
			continue;
		int fin = frozen ? 0 : lg_fin(lg[i].fd);
		if (!fin && !late)
			continue;       /* its FIN is on its way */
		if (fin < 0)
			lg[i].fd = -1;  /* not ours to close */
		out[k++] = lg_close(i, fin == 1);
	}
	return k;
}

/* Close the entries done (all: every one). */
static void lg_reap(bool all)
{
	struct lg_done done[LG_MAX];
	struct lg_entry resend[LG_MAX];
	int nresend = 0;
	KEEP_ERRNO();
	pthread_mutex_lock(&lg_lock);
	int k = lg_collect(all, done, resend, &nresend);
	pthread_mutex_unlock(&lg_lock);
	for (int i = 0; i < k; i++)
		lg_done(&done[i]);
	for (int i = 0; i < nresend; i++)
		lg_resend(resend[i]);
}

/* Before a connect() to an accelerated listener (the kernel sockets whose
 * FIN came are closed, so that their ports are free for it), and by the
 * control thread every 50 ms while one waits. */
void linger_reap(void)
{
	if (atomic_load_explicit(&lg_n, memory_order_relaxed))
		lg_reap(false);
}

/* exit(): what still waits is closed now (counted: the kernel's close at
 * our end would not be). */
void linger_exit(void)
{
	if (atomic_load_explicit(&lg_n, memory_order_relaxed))
		lg_reap(true);
}

/* The control thread's look (sc__tick_hook, set at load), every 50 ms
 * while it says so: while one waits, or one came since its last look (a
 * client whose closes are reaped by its next connect keeps it looking,
 * instead of waking it at every close). */
bool linger_tick(void)
{
	static uint64_t seen;   /* (the control thread's) */
	linger_reap();
	/* seq_cst: as lg_n's store in linger_take (sc__tick_note's pairing) */
	uint64_t t = atomic_load_explicit(&lg_takes, memory_order_seq_cst);
	bool busy = t != seen || atomic_load_explicit(&lg_n, memory_order_seq_cst);
	seen = t;
	return busy;
}

static void lg_init(void)
{
	atexit(linger_exit);
}

/* The program closes fd, a connection it made on shared memory, c, with a
 * plain ending (sc__close_begin done): keep its kernel socket and c's slot
 * until the peer's FIN.  False if it cannot wait (then the caller lets c
 * go, and the close is ours first, as before). */
bool linger_take(int fd, struct sc_conn *c, bool reusable)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	if (atomic_load_explicit(&lg_n, memory_order_relaxed) >= LG_MAX)
		return false;
	pthread_once(&once, lg_init);
	KEEP_ERRNO();
	/* (the dup under the lock: listed before any fork can copy it) */
	pthread_mutex_lock(&lg_lock);
	int n = atomic_load_explicit(&lg_n, memory_order_relaxed);
	int kfd = n < LG_MAX ? sc__fd_dup_high(fd) : -1;
	if (kfd >= 0) {
		lg[n] = (struct lg_entry){ .fd = kfd, .reusable = reusable, .c = c,
					   .until = sc__now_ns() + LG_MS * 1000000ull };
		/* seq_cst: the count before sc__tick_note's look at the
		 * control thread's flag (it clears that, then reads ours) */
		atomic_store_explicit(&lg_n, n + 1, memory_order_seq_cst);
		atomic_fetch_add_explicit(&lg_takes, 1, memory_order_seq_cst);
	}
	pthread_mutex_unlock(&lg_lock);
	if (kfd < 0)
		return false;
	sc__tick_note();
	return true;
}

/* close_range / closefrom: ours in [first, last], up to max of them. */
int linger_in(unsigned first, unsigned last, int *out, int max)
{
	int n = 0;
	pthread_mutex_lock(&lg_lock);
	for (int i = 0; i < atomic_load_explicit(&lg_n, memory_order_relaxed) && n < max; i++)
		if ((unsigned)lg[i].fd >= first && (unsigned)lg[i].fd <= last)
			out[n++] = lg[i].fd;
	pthread_mutex_unlock(&lg_lock);
	return n;
}

/* fork() (our wrapper) holds lg_lock across the kernel's fork, so that
 * the child's list names every dup it inherits (none half closed, none
 * made and not yet listed) -- once the process has made one: a process
 * that never did (a forking server) writes nothing more per fork (a page
 * the parent writes after it is a copy-on-write fault), and a first dup
 * made in another thread during such a fork may be copied unlisted; so
 * may one being closed during a fork not through our wrapper (a raw
 * clone).  Such a child holds the server's FIN back until it exits. */
static bool lg_forking;         /* (under lg_lock) held by our fork() ... */
static pthread_t lg_forker;     /* ... in this thread */

bool linger_fork_begin(void)
{
	/* seq_cst: as its increment in linger_take (a hint, see above) */
	if (!atomic_load_explicit(&lg_takes, memory_order_seq_cst))
		return false;
	/* (the lock-order checker is not told: the child's atfork handlers
	 * take other locks while this one is held, and it is taken inside
	 * none -- held across the kernel's fork only, as glibc's own) */
	(pthread_mutex_lock)(&lg_lock);
	lg_forker = pthread_self();
	lg_forking = true;
	return true;
}

/* After the kernel's fork, in the parent and in the child (its only
 * thread): what linger_fork_begin took. */
void linger_fork_end(bool locked)
{
	if (!locked)
		return;
	lg_forking = false;
	(pthread_mutex_unlock)(&lg_lock);
}

/* In a fork child: the parent's kernel sockets are the parent's to close
 * (ours would hold their FIN back), and so are the connections' slots
 * (left alone: the parent lets them go). */
void linger_atfork_child(void)
{
	/* our fork() unlocks it in the child too; another fork: whoever
	 * held it did not come along */
	if (!lg_forking || !pthread_equal(lg_forker, pthread_self()))
		sc__mutex_reset(&lg_lock);
	for (int i = 0; i < atomic_load_explicit(&lg_n, memory_order_relaxed); i++)
		R(close)(lg[i].fd);
	SC_RESET_ATOMIC(lg_n, 0);
}
