/* SPDX-License-Identifier: MIT */
/*
 * Socket layer: the LD_PRELOAD interposer (design brief, layer 5), built
 * into libshortcut.so only.
 *
 * The program's fd stays the real kernel TCP socket for the connection's
 * whole life; a flat table indexed by fd maps accelerated fds to their
 * sc_sock.  Calls on any other fd go straight to libc after one table load.
 *
 * Handshake (rundir.h): connect() to an address a live accelerated listener
 * serves binds the socket's port if needed, posts an offer on the port's
 * board, then makes the real TCP connect.  The process that accept()s the
 * connection claims the offer and opens a shared-memory connection to the
 * client's rendezvous with the offer's tag.  Until the client sees that
 * OPEN, what it writes waits in a private buffer (one ring's worth at
 * least); if instead the peer answers over TCP, or nobody claims the offer
 * in time, the client withdraws it, writes the buffer to TCP and stays
 * plain.  A peer that is not accelerated never receives a byte the program
 * did not write.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "rawsys.h"
#include "ring.h"
#include "rundir.h"
#include "stats.h"
#include "txrx.h"

#define EXPORT __attribute__((visibility("default")))

/* epoll (the readiness section) */
static void ep_close(int epfd);
static void ep_expose_fd(int fd);
static void ep_refresh_exposed(void);
struct sc_ep;
static void ep_expose(struct sc_ep *e);
static void ep_kid_set(struct sc_ep *e, int fd, int op, uint64_t data);
static uint64_t ep_kid_cookie(struct sc_ep *e, int fd);
static void ep_mark_shared(void);
static struct sc_ep *ep_of(int fd);
static void ep_dup(int oldfd, int newfd);
struct sc_sock;
static void ep_rewatch(struct sc_ep *except, struct sc_sock **socks, size_t n);
static bool ep_elsewhere(struct sc_ep *e, struct sc_sock *s);
static _Atomic int nexp_sig;   /* exposed sets we hold readable (ep_expose) */

/* switching back to TCP */
static int sock_switch(int fd, struct sc_sock *s);
static void sw_ask(struct sc_conn *c);
static void sw_hook(struct sc_conn *c);
static void sw_rights(const struct msghdr *m);
static void sw_start(void);
static bool kid_may_hold(uint32_t gen);
static bool sw_orphan(int fd, struct sc_sock *s);
static int sw_request_owner_(int fd, struct sc_sock *s, uint32_t why, uint64_t wait_ns);
static int sw_request_owner(int fd, struct sc_sock *s)
{
	return sw_request_owner_(fd, s, SC_SWREQ_USE, 30000000000ull);
}
static void sw_kick(void);
static bool off_file(void);
static void ep_switched(struct sc_sock *s, bool child_set);
static void tcp_gate(struct sc_sock *s);
static void ep_inherited_use(struct sc_ep *e);
static struct ep_inh {
	struct sc_ep *ep;
	int fd;
	struct ep_inh *_Atomic next;
} *_Atomic ep_inh;
static pthread_mutex_t ep_inh_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic uint32_t nforks;        /* fork()s this process made */

/* ---- the real functions ------------------------------------------------- */

#define REALS(X) \
	X(socket) X(connect) X(listen) X(accept) X(accept4) X(close) X(shutdown) \
	X(read) X(write) X(readv) X(writev) X(send) X(recv) X(sendto) X(recvfrom) \
	X(sendmsg) X(recvmsg) X(sendmmsg) X(recvmmsg) X(dup) X(dup2) X(dup3) \
	X(fcntl) X(ioctl) X(poll) X(ppoll) X(select) X(pselect) X(epoll_create) \
	X(epoll_create1) X(epoll_ctl) X(epoll_wait) X(epoll_pwait) X(epoll_pwait2) X(getsockopt) \
	X(setsockopt) X(sendfile) X(__read_chk) X(__recv_chk) X(__recvfrom_chk) \
	X(__poll_chk) X(__ppoll_chk) X(fork) X(execve) X(execv) X(execvp) X(execvpe) \
	X(fexecve) X(posix_spawn) X(posix_spawnp) X(system) X(popen) X(close_range) \
	X(closefrom)

extern ssize_t __read_chk(int, void *, size_t, size_t);
extern ssize_t __recv_chk(int, void *, size_t, size_t, int);
extern ssize_t __recvfrom_chk(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
extern int __poll_chk(struct pollfd *, nfds_t, int, size_t);
extern int __ppoll_chk(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);

#define DECL(f) static __typeof__(f) *real_##f;
REALS(DECL)
static int (*real_fcntl64)(int, int, ...);
static int (*real_execveat)(int, const char *, char *const[], char *const[], int);

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static void real_init(void)
{
#define LOAD(f) real_##f = (__typeof__(f) *)dlsym(RTLD_NEXT, #f);
	REALS(LOAD)
	real_fcntl64 = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl64");
	real_execveat = (int (*)(int, const char *, char *const[], char *const[], int))
		dlsym(RTLD_NEXT, "execveat");
	if (!real_fcntl64)
		real_fcntl64 = real_fcntl;
}
#define R(f) (pthread_once(&real_once, real_init), real_##f)

/* ---- state -------------------------------------------------------------- */

enum { M_TCP, M_LISTEN, M_SPENDING, M_PENDING, M_SHM };

#define PBUF_CAP SC_RING_MIN    /* a pending client's buffer: fits any ring */

struct sc_sock {
	pthread_mutex_t lock;   /* mode changes, the pending state */
	pthread_mutex_t wlock;  /* with wcond: sends wait while resending */
	pthread_cond_t wcond;
	_Atomic bool resending; /* switched back to TCP, and the bytes the peer
				 * never read are being re-sent (tcp_gate) */
	_Atomic int mode;
	int refs;               /* fds naming it (dup), under table_lock */
	bool nonblock;          /* O_NONBLOCK of the open file description */
	bool counted;           /* an established connection (bytes_tcp_*) */
	bool linger0;
	bool shut_wr;           /* we shut down writing */
	bool err_reported;      /* a reset was reported once (as sk_err) */
	bool sent_to_closed;    /* one send went to a closed peer (TCP: then RST) */
	bool fastopen;          /* TCP_FASTOPEN_CONNECT / TCP_REPAIR set: stays TCP */
	uint64_t rcvtimeo_ns, sndtimeo_ns;      /* SO_RCVTIMEO / SO_SNDTIMEO, 0: none */
	int rcvlowat;                   /* SO_RCVLOWAT as the kernel keeps it; 0/1: none */
	int sndbuf, rcvbuf;     /* SO_SNDBUF / SO_RCVBUF as set (half the kernel's); 0: not */
	bool cork;              /* TCP_CORK */
	int tos, tclass;        /* the program's own IP_TOS, IPV6_TCLASS (-1: none) */
	int cslot;              /* our connecting slot on the board (-1: none) */
	int declined;           /* board entry we declined for this connection, or -1 */
	uint32_t fork_gen;      /* forks we had made when it went to shared memory */
	pid_t parent;           /* in a fork child: the parent (owner_gone) */
	struct sc_addr16 local; /* its local address (as the entry names it) */
	pid_t owner;            /* the process whose shared-memory state it is */
	struct sc_conn *c;      /* M_SHM */
	/* M_LISTEN */
	struct sc_board *board;
	uint64_t ino;
	/* M_PENDING: the client side of an offer */
	uint64_t tag;
	int offer;
	uint64_t deadline_ns;
	struct sc_addr16 dst;   /* where it connected (its listener's liveness) */
	char *pbuf;
	size_t plen;
	int efd;                /* readable once the OPEN arrived */
	bool efd_exposed;       /* ... handed to a poller or an epoll set (kept
				 * for the socket's life: they may still name it) */
	struct sc_conn *_Atomic attached;
	struct sc_sock *pnext;  /* pending list */
	struct sc_conn_rec *rec;        /* `shortcut stat` record, or NULL */
};

static inline void rec_add(_Atomic uint64_t *ctr, ssize_t n)
{
	if (n > 0)      /* one writer in practice; a racing thread costs a count */
		atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) +
				      (uint64_t)n, memory_order_relaxed);
}

/* Describe an established connection of s in its stats record. */
static void rec_fill(struct sc_sock *s, int fd, uint32_t mode, int reason, int32_t peer_pid)
{
	if (!s->rec && !(s->rec = sc__rec_get()))
		return;
	struct sc_conn_rec *r = s->rec;
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	r->fd = fd;
	r->peer_pid = peer_pid;
	r->reason = reason >= 0 ? (uint32_t)reason + 1 : 0;
	if (!r->lport && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		sc__addr16((struct sockaddr *)&a, &r->laddr, &r->lport);
	al = sizeof(a);
	if (!r->pport && getpeername(fd, (struct sockaddr *)&a, &al) == 0)
		sc__addr16((struct sockaddr *)&a, &r->paddr, &r->pport);
	atomic_store_explicit(&r->mode, mode, memory_order_release);
}

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
/* our pid, cached (glibc no longer does); refreshed in the fork child */
static pid_t my_pid;
#define PAGE_BITS 12
#define NPAGES 256
static struct sc_sock *_Atomic *_Atomic pages[NPAGES];

static inline struct sc_sock *sock_get(int fd)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return NULL;
	struct sc_sock *_Atomic *p = atomic_load_explicit(&pages[fd >> PAGE_BITS],
							 memory_order_acquire);
	return p ? atomic_load_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], memory_order_acquire)
		 : NULL;
}

/* table_lock held */
static bool sock_set(int fd, struct sc_sock *s)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return false;
	struct sc_sock *_Atomic *p = atomic_load(&pages[fd >> PAGE_BITS]);
	if (!p) {
		if (!s)
			return true;
		p = calloc(1u << PAGE_BITS, sizeof(*p));
		if (!p)
			return false;
		atomic_store_explicit(&pages[fd >> PAGE_BITS], p, memory_order_release);
	}
	atomic_store_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], s, memory_order_release);
	return true;
}

static struct {
	bool disabled;
	int log;
	uint32_t claim_ms;
	bool ok;                /* configuration valid and run directory usable */
	bool uring;             /* the program set up an io_uring: nothing new */
	struct sc_listener *rdv;        /* our rendezvous (clients), lazily */
	pthread_mutex_t rdv_lock;       /* pending (taken under a group lock) */
	pthread_mutex_t create_lock;    /* rdv creation (takes link locks) */
	struct sc_sock *pending;        /* offers waiting for their OPEN */
} G = { .claim_ms = 10000, .rdv_lock = PTHREAD_MUTEX_INITIALIZER,
	.create_lock = PTHREAD_MUTEX_INITIALIZER };

static void logf_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(int level, const char *fmt, ...)
{
	if (G.log < level)
		return;
	int saved = errno;
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "shortcut[%d]: ", (int)my_pid);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (R(write)(2, buf, (size_t)n) < 0) {
	}
	errno = saved;
}
#define LOG(lvl, ...) do { if (G.log >= (lvl)) logf_((lvl), __VA_ARGS__); } while (0)

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- start-up ----------------------------------------------------------- */

static void atfork_child(void);

__attribute__((constructor)) static void sc_preload_init(void)
{
	pthread_once(&real_once, real_init);
	my_pid = getpid();
	G.ok = sc__config_load() == 0;
	G.log = (int)sc__cfg.log;
	G.disabled = sc__cfg.disable;
	G.claim_ms = sc__cfg.claim_ms;
	if (!G.ok) {
		/* a wrong setting is reported and nothing is accelerated:
		 * the program still runs, on plain TCP */
		fprintf(stderr, "shortcut: configuration invalid; running without acceleration\n");
		G.disabled = true;
	}
	if (!sc__rundir())
		G.disabled = true;      /* said at the first TCP socket (stats_open) */
	pthread_atfork(NULL, NULL, atfork_child);
	sc__switch_hook = sw_hook;
	LOG(2, "loaded (%s)", G.disabled ? "disabled" : "enabled");
}

/* ---- sockets ------------------------------------------------------------ */

static pthread_once_t stats_once = PTHREAD_ONCE_INIT;
static void stats_open(void)
{
	/* disabled processes count too (their fallbacks say why) */
	if (sc__rundir() && sc__stats_file_open() < 0)
		LOG(1, "cannot create a stats file in the run directory");
	if (!sc__rundir()) {
		/* a failure that disables acceleration says so, once, when
		 * the process first has a TCP socket it would have sped up */
		char buf[600];
		int n = snprintf(buf, sizeof(buf), "shortcut[%d]: run directory unusable: %s; "
				 "this process runs without acceleration\n", (int)my_pid,
				 sc__rundir_error());
		if (n > (int)sizeof(buf) - 1)
			n = (int)sizeof(buf) - 1;
		if (R(write)(2, buf, (size_t)n) < 0) {
		}
	}
}

static void ep_forget_sock(struct sc_sock *s);

static struct sc_sock *sock_new(int fd, int mode, bool nonblock)
{
	/* a socket now: whatever fd number this was before (an epoll set
	 * closed behind our back) is not an epoll set any more */
	if (ep_of(fd))
		ep_close(fd);
	/* the stats file appears with the process's first TCP socket */
	pthread_once(&stats_once, stats_open);
	struct sc_sock *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->wlock, NULL);
	pthread_cond_init(&s->wcond, NULL);
	s->mode = mode;
	s->refs = 1;
	s->nonblock = nonblock;
	s->owner = my_pid;
	s->efd = -1;
	s->offer = -1;
	s->tos = s->tclass = -1;
	s->cslot = -1;
	s->declined = -1;
	pthread_mutex_lock(&table_lock);
	if (!sock_set(fd, s)) {
		pthread_mutex_unlock(&table_lock);
		free(s);
		return NULL;
	}
	pthread_mutex_unlock(&table_lock);
	return s;
}

/* s->lock held: s is settled.  Its eventfd is signalled no more (the
 * control thread writes it under rdv_lock, for listed sockets only); one
 * that never went out of the library goes now (a connection's fd costs
 * then only its socket). */
static void pending_unlink(struct sc_sock *s)
{
	pthread_mutex_lock(&G.rdv_lock);
	for (struct sc_sock **pp = &G.pending; *pp; pp = &(*pp)->pnext)
		if (*pp == s) {
			*pp = s->pnext;
			break;
		}
	pthread_mutex_unlock(&G.rdv_lock);
	if (s->efd >= 0 && !s->efd_exposed) {
		R(close)(s->efd);
		s->efd = -1;
	}
}

/* The last fd naming s is gone (s no longer in the table). */
static int pending_settle(int fd, struct sc_sock *s, bool block, int max_ms);

static void sock_release(struct sc_sock *s, int fd_of_release)
{
	ep_forget_sock(s);
	pthread_mutex_lock(&s->lock);
	/* bytes the program sent are the peer's: settle first (as the
	 * kernel delivers them after close), then close as settled */
	if (atomic_load(&s->mode) == M_PENDING && s->plen)
		pending_settle(fd_of_release, s, true, (int)G.claim_ms);
	int mode = atomic_load(&s->mode);
	if (mode == M_TCP && s->c) {
		/* switched back to TCP: the kernel socket's close is the close */
		if (s->owner == my_pid)
			sc__switch_release(s->c);
		s->c = NULL;
	} else if (mode == M_SHM && s->c && s->owner == my_pid && fd_of_release >= 0 &&
		   kid_may_hold(s->fork_gen) && sw_orphan(fd_of_release, s)) {
		/* a child forked since may hold the socket too (the kernel's
		 * close sends no FIN then): the connection goes on, on TCP;
		 * the switch thread switches it and frees s */
		pthread_mutex_unlock(&s->lock);
		return;
	} else if (mode == M_SHM && s->c) {
		if (s->owner == my_pid) {
			if (s->linger0)
				sc_set_linger0(s->c, 1);
			sc_close(s->c);
		}
		s->c = NULL;
	} else if (mode == M_PENDING) {
		pending_unlink(s);
		if (s->board && s->offer >= 0)
			sc__offer_withdraw(s->board, s->offer, s->tag);
		struct sc_conn *c = atomic_exchange(&s->attached, NULL);
		if (c)
			sc_close(c);
	} else if (mode == M_LISTEN && s->board && s->owner == my_pid) {
		sc__board_unlisten(s->board, s->ino);
	}
	if (s->declined >= 0 && s->board)
		sc__offer_undecline(s->board, s->declined, &s->local);
	if (s->efd >= 0)
		R(close)(s->efd);
	free(s->pbuf);
	sc__rec_put(s->rec);
	s->rec = NULL;
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->wlock);
	pthread_cond_destroy(&s->wcond);
	free(s);
}

/* fd is being closed (still open: same) or was replaced: drop its
 * reference. */
static void fd_forget_(int fd, bool same);
static void fd_forget(int fd)
{
	fd_forget_(fd, false);
}

/* A child of vfork (or clone with CLONE_VM) shares our memory, so our
 * table, but not our fds: what it closes or dups is its own, and must not
 * touch the table (Python's subprocess closes every fd in its vfork child
 * before the exec).  getpid() only for fds we track. */
static bool in_vfork_child(void)
{
	return getpid() != my_pid;
}

static void fd_forget_(int fd, bool same)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || in_vfork_child())
		return;
	pthread_mutex_lock(&table_lock);
	s = sock_get(fd);
	bool last = false;
	if (s) {
		sock_set(fd, NULL);
		last = --s->refs == 0;
	}
	pthread_mutex_unlock(&table_lock);
	if (last)
		sock_release(s, same ? fd : -1);
}

static void fd_alias(int oldfd, int newfd)
{
	struct sc_sock *s = sock_get(oldfd);
	if (!s || newfd < 0 || in_vfork_child())
		return;
	pthread_mutex_lock(&table_lock);
	if (sock_get(oldfd) == s && sock_set(newfd, s))
		s->refs++;
	pthread_mutex_unlock(&table_lock);
}

/* ---- rendezvous: OPENs for our offers ----------------------------------- */

static int pending_to_shm(struct sc_sock *s);

/* Control thread, group lock held: an OPEN carrying a tag arrived. */
static int rdv_deliver(struct sc_listener *l, struct sc_conn *c)
{
	uint64_t one = 1;
	int rc = -ECONNREFUSED;

	pthread_mutex_lock(&G.rdv_lock);
	for (struct sc_sock *s = G.pending; s; s = s->pnext) {
		if (s->tag != c->tag || !c->tag)
			continue;
		struct sc_conn *none = NULL;
		if (atomic_compare_exchange_strong(&s->attached, &none, c)) {
			if (R(write)(s->efd, &one, sizeof(one)) < 0) {
			}
			rc = 0;
		}
		break;
	}
	pthread_mutex_unlock(&G.rdv_lock);
	return rc;
}

/* Control thread, no lock held: an OPEN may have arrived for a client
 * that is not in a socket call (it wrote, then waits on something else):
 * move its buffered bytes now, or they would sit there. */
static void rdv_after(void)
{
	for (;;) {
		struct sc_sock *found = NULL;
		pthread_mutex_lock(&G.rdv_lock);
		for (struct sc_sock *s = G.pending; s; s = s->pnext)
			if (atomic_load(&s->attached) && pthread_mutex_trylock(&s->lock) == 0) {
				found = s;
				break;
			}
		pthread_mutex_unlock(&G.rdv_lock);
		if (!found)
			return;
		/* the socket is ours to settle (a caller holding its lock
		 * would settle it itself) */
		if (atomic_load(&found->mode) == M_PENDING && atomic_load(&found->attached))
			pending_to_shm(found);
		pthread_mutex_unlock(&found->lock);
	}
}

static int rdv_ensure(void)
{
	char path[128];
	int rc = 0;

	if (atomic_load_explicit((struct sc_listener *_Atomic *)&G.rdv, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&G.create_lock);
	if (!G.rdv) {
		struct sc_listener *l;
		rc = sc__rendezvous_path(my_pid, path, sizeof(path));
		if (!rc)
			rc = sc_listen(path, 4096, &l);
		if (!rc) {
			l->deliver = rdv_deliver;
			sc__ctl_after_hook = rdv_after;
			atomic_store_explicit((struct sc_listener *_Atomic *)&G.rdv, l,
					      memory_order_release);
		}
	}
	pthread_mutex_unlock(&G.create_lock);
	return rc;
}

/* ---- classification ------------------------------------------------------ */

static bool is_tcp_type(int type, int protocol)
{
	return (type & 0xf) == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP);
}

static uint64_t fd_ino(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ---- pending clients ---------------------------------------------------- */

static void rec_fill(struct sc_sock *s, int fd, uint32_t mode, int reason, int32_t peer_pid);

static void fallback_stat(struct sc_sock *s, int fd, enum sc_fallback why)
{
	if (fd >= 0)
		rec_fill(s, fd, SC_REC_TCP, (int)why, 0);
	sc__stat_fallback(why);
	s->counted = true;
	LOG(1, "connection stays on TCP: %s", sc__fallback_names[why]);
}


/* Write all of buf to the kernel socket, waiting for room if needed. */
static int tcp_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = R(send)(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			R(poll)(&p, 1, 1000);
			continue;
		}
		if (n < 0)
			return -errno;
		SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* s->lock held: the offer lost; continue on TCP. */
static int pending_to_tcp(int fd, struct sc_sock *s, enum sc_fallback why)
{
	int rc = 0;
	pending_unlink(s);
	if (s->plen)
		rc = tcp_write_all(fd, s->pbuf, s->plen);
	free(s->pbuf);
	s->pbuf = NULL;
	s->plen = 0;
	fallback_stat(s, fd, why);
	atomic_store_explicit(&s->mode, M_TCP, memory_order_release);
	return rc;
}

/* s->lock held: the OPEN arrived; continue on shared memory. */
static int pending_to_shm(struct sc_sock *s)
{
	struct sc_conn *c = atomic_exchange(&s->attached, NULL);
	pending_unlink(s);
	s->offer = -1;          /* the claimer frees the entry */
	s->c = c;
	sc_set_nonblock(c, 0);          /* O_NONBLOCK is applied per call */
	if (s->plen) {
		/* an empty ring of at least PBUF_CAP bytes: never waits */
		ssize_t n = sc_send(c, s->pbuf, s->plen, SC_NONBLOCK);
		if (n == -SC_ESWITCHED) {
			/* the peer is switching to TCP already: the bytes go
			 * there, after the switch (sock_switch_) */
			n = 0;
		} else if (n != (ssize_t)s->plen) {
			LOG(1, "pending bytes did not fit (%zd)", n);
			n = (ssize_t)s->plen;
		}
		if (n > 0)
			memmove(s->pbuf, s->pbuf + n, s->plen - (size_t)n);
		s->plen -= (size_t)n;
	}
	if (!s->plen) {
		free(s->pbuf);
		s->pbuf = NULL;
	}
	s->counted = true;
	SC_STAT_ADD(conns_accelerated, 1);
	sc_set_bufs(c, s->sndbuf, s->rcvbuf);
	sc_set_cork(c, s->cork);
	atomic_store_explicit(&s->mode, M_SHM, memory_order_release);
	if (s->rec) {
		struct sc_conn_info ci;
		sc_conn_info(c, &ci);
		s->rec->peer_pid = ci.peer_pid;
		atomic_store_explicit(&s->rec->mode, SC_REC_SHM, memory_order_release);
	}
	s->fork_gen = atomic_load(&nforks);
	sw_start();
	LOG(1, "connection on shared memory (client)");
	return 0;
}

/* Try to settle a pending client (s->lock held).  Returns 0 when the mode
 * is no longer M_PENDING, -EAGAIN if it must wait (and !block). */
/* The process that claimed our offer died (the kernel socket ended: FIN
 * or RST) before its OPEN was done with.  The OPEN may still be in our
 * rendezvous, sent just before: a last look (bounded), then plain TCP,
 * where the program reads the end.  (Before, this waited for ever.) */
static int pending_claimer_died(int fd, struct sc_sock *s)
{
	uint64_t end = now_ns() + 200000000u;
	while (!atomic_load(&s->attached) && now_ns() < end) {
		if (G.rdv)
			sc__listener_pump(G.rdv);
		struct pollfd p = { .fd = s->efd, .events = POLLIN };
		if (!atomic_load(&s->attached))
			R(poll)(&p, 1, 10);
	}
	/* off the pending list under the lock that deliveries take: an OPEN
	 * read from now on finds no socket, and is refused */
	pthread_mutex_lock(&G.rdv_lock);
	bool attached = atomic_load(&s->attached);
	if (!attached)
		for (struct sc_sock **pp = &G.pending; *pp; pp = &(*pp)->pnext)
			if (*pp == s) {
				*pp = s->pnext;
				break;
			}
	pthread_mutex_unlock(&G.rdv_lock);
	if (attached)
		return pending_to_shm(s);
	s->offer = -1;
	LOG(1, "the process that claimed a connection died before setting it up: TCP");
	return pending_to_tcp(fd, s, SC_FB_RENDEZVOUS);        /* unlinks: no OPEN later */
}

static int pending_settle(int fd, struct sc_sock *s, bool block, int max_ms)
{
	uint64_t start = now_ns();

	for (;;) {
		if (atomic_load(&s->mode) != M_PENDING)
			return 0;
		if (!atomic_load(&s->attached) && G.rdv &&
		    sc__offer_state(s->board, s->offer, s->tag) == SC_OFFER_CLAIMED)
			sc__listener_pump(G.rdv);       /* the OPEN may be waiting */
		if (atomic_load(&s->attached))
			return pending_to_shm(s);
		uint32_t st = sc__offer_state(s->board, s->offer, s->tag);
		if (st == SC_OFFER_DECLINED) {
			sc__offer_withdraw(s->board, s->offer, s->tag);
			s->offer = -1;
			return pending_to_tcp(fd, s, SC_FB_RENDEZVOUS);
		}
		/* anything on TCP (data, FIN, RST, a failed connect) before the
		 * OPEN: the peer is plain, since an accelerated one sends the
		 * OPEN before it returns from accept */
		char b;
		ssize_t n = R(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		bool tcp_active = n >= 0 || (errno != EAGAIN && errno != EINTR);
		bool late = now_ns() > s->deadline_ns;
		/* the listener gone meanwhile (killed, exec'd, withdrawn):
		 * nobody will claim the offer */
		bool gone = st == SC_OFFER_OFFERED && !sc__board_serves(s->board, &s->dst);
		if (tcp_active || late || gone) {
			if (sc__offer_withdraw(s->board, s->offer, s->tag)) {
				s->offer = -1;
				return pending_to_tcp(fd, s, tcp_active ? SC_FB_PEER_PLAIN :
							     gone ? SC_FB_NO_LISTENER :
							     SC_FB_CLAIM_TIMEOUT);
			}
			/* claimed: the OPEN is on its way, or declined */
			block = true;
		}
		int32_t who;
		if (tcp_active && n <= 0 && st == SC_OFFER_CLAIMED &&
		    (who = sc__offer_claimer(s->board, s->offer, s->tag)) > 0 &&
		    !sc__pid_alive(who))
			return pending_claimer_died(fd, s);
		if (!block)
			return -EAGAIN;
		if (max_ms >= 0 && now_ns() - start > (uint64_t)max_ms * 1000000u)
			return -EAGAIN;
		/* wait for: the OPEN delivered (eventfd), anything on TCP, or
		 * the OPEN itself on one of our rendezvous groups (we then
		 * read it ourselves: one wake-up instead of the control
		 * thread's and then ours) */
		struct pollfd p[2 + 16] = { { .fd = s->efd, .events = POLLIN },
					    { .fd = fd, .events = POLLIN } };
		int np = 2;
		if (G.rdv) {
			int gfds[16];
			int ng = sc__listener_group_fds(G.rdv, gfds, 16);
			for (int i = 0; i < ng; i++)
				p[np++] = (struct pollfd){ .fd = gfds[i], .events = POLLIN };
		}
		if (tcp_active)
			p[1].fd = -1;   /* it has told us all it can */
		R(poll)(p, (nfds_t)np, 20);
	}
}

/* ---- connect / listen / accept ---------------------------------------- */

EXPORT int socket(int domain, int type, int protocol)
{
	int fd = R(socket)(domain, type, protocol);
	if (fd >= 0 && (domain == AF_INET || domain == AF_INET6) && is_tcp_type(type, protocol))
		sock_new(fd, M_TCP, type & SOCK_NONBLOCK);
	return fd;
}

/* Offer tags: unique per process and unpredictable enough (a random
 * per-process key through splitmix64); 56 bits, never 0. */
static uint64_t next_tag(void)
{
	static _Atomic uint64_t key, ctr;
	uint64_t k = atomic_load_explicit(&key, memory_order_relaxed);
	if (!k) {
		if (getentropy(&k, sizeof(k)) < 0 || !k)
			k = (uint64_t)now_ns() ^ (uint64_t)my_pid << 40 ^ 0x9e3779b97f4a7c15ull;
		uint64_t zero = 0;
		if (!atomic_compare_exchange_strong(&key, &zero, k))
			k = zero;
	}
	for (;;) {
		uint64_t z = k + atomic_fetch_add(&ctr, 1) * 0x9e3779b97f4a7c15ull;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z = (z ^ (z >> 31)) & SC_TAG_MASK;
		if (z)
			return z;
	}
}

/* An accelerated connection costs a few fds besides its socket (its
 * pollable channel, an eventfd, a wake socket; the peer holds one of ours):
 * a process near its RLIMIT_NOFILE stays on TCP rather than run out of fds
 * in the middle of a wait.  fds are allocated lowest first, so the socket's
 * number tells how many are open. */
static bool fd_headroom(int fd)
{
	static _Atomic long limit;
	long l = atomic_load_explicit(&limit, memory_order_relaxed);
	if (!l) {
		struct rlimit rl;
		l = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ?
		    (long)rl.rlim_cur : 1L << 20;
		atomic_store_explicit(&limit, l, memory_order_relaxed);
	}
	return (long)fd + 64 < l - l / 4;
}

/* Before the real connect: is there an accelerated listener for addr, and
 * can we take part?  Marks the SYN and prepares the pending state. */
static int offer_prepare(int fd, struct sc_sock *s, const struct sockaddr *addr,
			 struct sc_addr16 *dst, enum sc_fallback *why)
{
	uint16_t dport;

	if (!sc__addr16(addr, dst, &dport) || !dport) {
		*why = SC_FB_NO_LISTENER;
		return -1;
	}
	if (sc__addr_is_any(dst)) {       /* connect(0.0.0.0) means this host */
		static const struct sc_addr16 lo4 = { { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
		static const struct sc_addr16 lo6 = { { [15] = 1 } };
		*dst = addr->sa_family == AF_INET ? lo4 : lo6;
	}
	struct sc_board *b = sc__board(dport, false);
	if (!b || !sc__board_serves(b, dst)) {
		*why = SC_FB_NO_LISTENER;
		return -1;
	}
	/* data in the SYN, or a repaired socket (a DSCP of the program's own
	 * is put back once the SYN is out: only the SYN carries our mark, and
	 * it never leaves the host) */
	if (s->fastopen) {
		*why = SC_FB_UNSUPPORTED;
		return -1;
	}
	if (!fd_headroom(fd)) {
		*why = SC_FB_LIMITS;
		return -1;
	}
	if (rdv_ensure() < 0) {
		*why = SC_FB_RENDEZVOUS;
		return -1;
	}
	s->pbuf = malloc(PBUF_CAP);
	if (s->efd < 0)
		s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!s->pbuf || s->efd < 0) {
		free(s->pbuf);
		s->pbuf = NULL;
		*why = SC_FB_NOMEM;
		return -1;
	}
	int tos = SC_SYN_TOS;
	if (R(setsockopt)(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) < 0 &&
	    (addr->sa_family != AF_INET6 ||
	     R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) < 0)) {
		free(s->pbuf);
		s->pbuf = NULL;
		*why = SC_FB_UNSUPPORTED;
		return -1;
	}
	if (addr->sa_family == AF_INET6)
		R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
	s->board = b;
	s->dst = *dst;
	/* until the offer is posted, the acceptor may wait for it */
	s->cslot = sc__board_connecting(b);
	return 0;
}

/* The SYN is out: the program's own IP_TOS / IPV6_TCLASS (or none) back,
 * and our connecting slot freed. */
static void offer_unmark(int fd, struct sc_sock *s, int family)
{
	int tos = s->tos >= 0 ? s->tos : 0, tclass = s->tclass >= 0 ? s->tclass : 0;
	R(setsockopt)(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	if (family == AF_INET6)
		R(setsockopt)(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof(tclass));
	if (s->cslot >= 0 && s->board)
		sc__board_connected(s->board, s->cslot);
	s->cslot = -1;
}

/* After the real connect (made, or in progress): unmark, and post the
 * offer under the port the kernel gave us. */
static int offer_post(int fd, struct sc_sock *s, int family, const struct sc_addr16 *dst,
		      enum sc_fallback *why)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	struct sc_addr16 mine;
	uint16_t cport;

	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    !sc__addr16((struct sockaddr *)&me, &mine, &cport) || !cport) {
		offer_unmark(fd, s, family);
		*why = SC_FB_LIMITS;
		return -1;
	}
	s->tag = next_tag();
	pthread_mutex_lock(&G.rdv_lock);
	s->pnext = G.pending;
	G.pending = s;
	pthread_mutex_unlock(&G.rdv_lock);
	s->offer = sc__offer_post(s->board, cport, dst, s->tag);
	offer_unmark(fd, s, family);
	if (s->offer < 0) {
		pending_unlink(s);
		/* declined: the accepting side saw no mark (a retransmitted
		 * SYN) or gave up waiting; busy: another namespace's offer */
		*why = s->offer == -ECONNREFUSED ? SC_FB_PEER_PLAIN : SC_FB_LIMITS;
		s->offer = -1;
		return -1;
	}
	s->deadline_ns = now_ns() + (uint64_t)G.claim_ms * 1000000u;
	atomic_store(&s->mode, M_PENDING);
	rec_fill(s, fd, SC_REC_PENDING, -1, 0);
	LOG(3, "offer %d posted", s->offer);
	return 0;
}

EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t alen)
{
	struct sc_sock *s = sock_get(fd);
	enum sc_fallback why = SC_FB_NO_LISTENER;
	struct sc_addr16 dst;
	bool marked = false;

	if (!s || atomic_load(&s->mode) != M_TCP || s->counted || !addr ||
	    alen < sizeof(sa_family_t)) {
		LOG(3, "connect(%d) passes: %s", fd, !s ? "untracked" : "not fresh");
		return R(connect)(fd, addr, alen);
	}
	pthread_mutex_lock(&s->lock);
	if (G.disabled || off_file())
		why = SC_FB_DISABLED;
	else if (G.uring)
		why = SC_FB_UNSUPPORTED;
	else
		marked = offer_prepare(fd, s, addr, &dst, &why) == 0;
	int rc = R(connect)(fd, addr, alen);
	int err = errno;
	bool made = rc == 0 || err == EINPROGRESS;
	bool offered = false;
	if (marked) {
		if (made)
			offered = offer_post(fd, s, addr->sa_family, &dst, &why) == 0;
		else
			offer_unmark(fd, s, addr->sa_family);
		if (!offered) {
			free(s->pbuf);
			s->pbuf = NULL;
		}
	}
	if (made && !offered)
		fallback_stat(s, fd, why);
	pthread_mutex_unlock(&s->lock);
	errno = err;
	return rc;
}

EXPORT int listen(int fd, int backlog)
{
	struct sc_sock *s = sock_get(fd);
	int rc = R(listen)(fd, backlog);

	if (rc < 0 || !s || G.disabled || G.uring || atomic_load(&s->mode) != M_TCP)
		return rc;
	int saved = errno;
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	struct sc_addr16 a;
	uint16_t port;
	int one = 1;
	/* keep each SYN's headers: an accelerated client marks its SYN */
	R(setsockopt)(fd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one));
	if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
	    sc__addr16((struct sockaddr *)&me, &a, &port)) {
		pthread_mutex_lock(&s->lock);
		s->board = sc__board(port, true);
		s->ino = fd_ino(fd);
		if (s->board && sc__board_listen(s->board, &a, s->ino) == 0) {
			atomic_store(&s->mode, M_LISTEN);
			LOG(2, "listening on port %u, accelerated", port);
		} else {
			LOG(1, "cannot register the listener on port %u", port);
		}
		pthread_mutex_unlock(&s->lock);
	}
	errno = saved;
	return rc;
}

/* A connection we accepted on an accelerated listener: claim its offer. */
/* An accepted connection's first use in this process (not accept() itself:
 * a server that forks per connection uses it in the child, which must be
 * the one to claim it).  s->lock held; the mode leaves M_SPENDING. */
static void server_claim(int nfd, struct sc_sock *s)
{
	struct sockaddr_storage me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	struct sc_addr16 local, remote;
	uint16_t lport, cport;
	int32_t pid;
	uint64_t tag;

	atomic_store(&s->mode, M_TCP);  /* unless claimed below */
	s->owner = my_pid;
	if (getsockname(nfd, (struct sockaddr *)&me, &ml) < 0 ||
	    getpeername(nfd, (struct sockaddr *)&peer, &pl) < 0 ||
	    !sc__addr16((struct sockaddr *)&me, &local, &lport) ||
	    !sc__addr16((struct sockaddr *)&peer, &remote, &cport)) {
		fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
		return;
	}
	/* the record gets the addresses we have (rec_fill then asks nothing) */
	if (s->rec || (s->rec = sc__rec_get())) {
		s->rec->laddr = local;
		s->rec->lport = lport;
		s->rec->paddr = remote;
		s->rec->pport = cport;
	}
	struct sc_board *b = s->board ? s->board : sc__board(lport, false);
	if (!b) {
		fallback_stat(s, nfd, SC_FB_PEER_PLAIN);
		return;
	}
	/* the SYN tells whether the client is accelerated (TCP_SAVE_SYN) */
	bool room = fd_headroom(nfd);
	uint8_t syn[128];
	socklen_t sl = sizeof(syn);
	bool marked = false;
	if (R(getsockopt)(nfd, IPPROTO_TCP, TCP_SAVED_SYN, syn, &sl) == 0 && sl >= 2) {
		int tos = (syn[0] >> 4) == 4 ? syn[1] : (syn[0] >> 4) == 6 ?
			  ((syn[0] & 0x0f) << 4 | syn[1] >> 4) : 0;
		marked = (tos & 0xfc) == SC_SYN_TOS;
	}
	/* marked: its offer follows its connect() by microseconds; wait for
	 * it while a client is between its connect() and its offer (bounded),
	 * else decline the 4-tuple so it learns.  A marked SYN with nobody
	 * connecting is not waited for: anyone can mark a SYN. */
	uint64_t until = now_ns() + (marked && room ? 200000000u : 0);
	int idx;
	for (unsigned spin = 0;; spin++) {
		idx = sc__offer_claim(b, cport, &local, &pid, &tag);
		if (idx >= 0)
			break;
		if (sc__offer_withdrawn(b, cport, &local)) {
			/* it connected and closed before we looked (a port
			 * probe, wrk's test connection): nothing to set up,
			 * and no reason to wait */
			fallback_stat(s, nfd, SC_FB_PEER_CLOSED);
			return;
		}
		bool waited_out = now_ns() >= until;
		if (waited_out || !sc__board_anyone_connecting(b)) {
			int didx;
			if (sc__offer_decline_tuple(b, cport, &local, &didx) == -EAGAIN)
				continue;       /* it came: claim it */
			s->declined = didx;
			s->board = b;
			s->local = local;
			fallback_stat(s, nfd, !room ? SC_FB_LIMITS :
					      marked && waited_out ? SC_FB_CLAIM_TIMEOUT :
					      SC_FB_PEER_PLAIN);
			return;
		}
		if (spin < 64) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };
			nanosleep(&ts, NULL);
		}
	}
	if (!room || off_file() || G.uring) {
		/* the client learns it from the board and stays on TCP */
		sc__offer_decline(b, idx, tag);
		fallback_stat(s, nfd, !room ? SC_FB_LIMITS : G.uring ? SC_FB_UNSUPPORTED :
				      SC_FB_DISABLED);
		return;
	}
	char path[128];
	struct sc_conn *c = NULL;
	int rc = sc__rendezvous_path(pid, path, sizeof(path));
	if (!rc)
		rc = sc__connect_tagged(path, tag, 0, &c);      /* blocking: per call */
	if (rc) {
		/* the client learns it from the board and stays on TCP */
		sc__offer_decline(b, idx, tag);
		fallback_stat(s, nfd, rc == -ENOMEM ? SC_FB_NOMEM : SC_FB_RENDEZVOUS);
		return;
	}
	sc__offer_done(b, idx);
	s->c = c;
	s->counted = true;
	sc_set_bufs(c, s->sndbuf, s->rcvbuf);
	sc_set_cork(c, s->cork);
	atomic_store_explicit(&s->mode, M_SHM, memory_order_release);
	SC_STAT_ADD(conns_accelerated, 1);
	rec_fill(s, nfd, SC_REC_SHM, -1, pid);
	s->fork_gen = atomic_load(&nforks);
	sw_start();
	LOG(1, "connection on shared memory (server, peer pid %d)", (int)pid);
}

static void server_settle(int fd, struct sc_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->mode) == M_SPENDING)
		server_claim(fd, s);
	pthread_mutex_unlock(&s->lock);
}

EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	int nfd = R(accept4)(fd, addr, alen, flags);
	struct sc_sock *ls;

	if (nfd >= 0 && (ls = sock_get(fd))) {
		int saved = errno;
		if (atomic_load(&ls->mode) == M_LISTEN) {
			/* claimed at its first use (see server_claim) */
			struct sc_sock *s = sock_new(nfd, G.disabled ? M_TCP : M_SPENDING,
						     flags & SOCK_NONBLOCK);
			if (s && G.disabled)
				fallback_stat(s, nfd, SC_FB_DISABLED);
			else if (s)
				s->board = ls->board;
			if (s) {
				/* the kernel's accepted socket has the
				 * listener's buffer sizes */
				s->sndbuf = ls->sndbuf;
				s->rcvbuf = ls->rcvbuf;
				s->cork = ls->cork;
			}
		} else {
			struct sc_sock *s = sock_new(nfd, M_TCP, flags & SOCK_NONBLOCK);
			if (s && G.disabled)
				fallback_stat(s, nfd, SC_FB_DISABLED);
		}
		errno = saved;
	}
	return nfd;
}

EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	return accept4(fd, addr, alen, 0);
}

/* ---- data --------------------------------------------------------------- */

/* Map to the library's flags; -EOPNOTSUPP for what shared memory cannot do. */
static int sc_flags(struct sc_sock *s, int flags, bool rx)
{
	int f = 0;
	if (s->nonblock || (flags & MSG_DONTWAIT))
		f |= SC_NONBLOCK;
	if (rx && (flags & MSG_PEEK))
		f |= SC_PEEK;
	if (rx && (flags & MSG_WAITALL))
		f |= SC_WAITALL;
	if (!rx && (flags & MSG_MORE))
		f |= SC_MORE;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	return f;
}

/* A pending client writes: into the private buffer while it lasts. */
static ssize_t pending_send(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			    int flags)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && s->plen < PBUF_CAP; i++) {
		size_t n = iov[i].iov_len;
		if (n > PBUF_CAP - s->plen)
			n = PBUF_CAP - s->plen;
		memcpy(s->pbuf + s->plen, iov[i].iov_base, n);
		s->plen += n;
		done += n;
		if (n < iov[i].iov_len)
			break;
	}
	return (ssize_t)done;
}

static ssize_t shm_result(ssize_t rc, int flags, bool tx)
{
	if (rc >= 0)
		return rc;
	if (tx && rc == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	errno = (int)-rc;
	return -1;
}

static short sock_revents(int fd, struct sc_sock *s, short want, int *waitfd, bool arm);

/* Bytes waiting in c's receive ring. */
static int64_t rx_avail(struct sc_conn *c)
{
	sc__lock(&c->rxlock);
	int64_t v = sc__ring_avail(&c->rx);
	sc__unlock(&c->rxlock);
	return v;
}

/* What a receive of len bytes waits for under SO_RCVLOWAT: the low-water
 * mark, no more than len, and no more than the ring holds. */
static int64_t lowat_target(struct sc_sock *s, size_t len)
{
	int64_t t = s->rcvlowat;
	if ((size_t)t > len)
		t = (int64_t)len;
	if (t > (int64_t)s->c->rx.size)
		t = (int64_t)s->c->rx.size;
	return t;
}

/* A connection bound to an epoll set's channel: a poller sleeping on that
 * channel's fd can lose its wake-up to the set's own waiter, which resets
 * the fd when it wakes (the datagram is gone before the poller looks).  So
 * such a poller looks again every SHARED_SLICE_MS. */
#define SHARED_SLICE_MS 5
static bool on_shared_chan(struct sc_sock *s)
{
	if (atomic_load(&s->mode) != M_SHM || !s->c)
		return false;
	struct sc_chan *ch = atomic_load(&s->c->chan);
	return ch && !ch->private_;
}

/* A blocking call with SO_RCVTIMEO / SO_SNDTIMEO: wait on the connection's
 * fd until it is ready or the deadline passes (-EAGAIN, the kernel's answer
 * to a timed-out socket call). */
static int shm_wait_until(int fd, struct sc_sock *s, bool tx, uint64_t deadline)
{
	for (;;) {
		int wfd;
		short r = sock_revents(fd, s, tx ? POLLOUT : POLLIN, &wfd, true);
		if (r)
			return 0;
		uint64_t now = now_ns();
		if (now >= deadline)
			return -EAGAIN;
		struct pollfd p = { .fd = wfd, .events = POLLIN };
		uint64_t ms = deadline == UINT64_MAX ? 0 : (deadline - now + 999999) / 1000000;
		int t = deadline == UINT64_MAX ? -1 : ms > INT_MAX ? INT_MAX : (int)ms;
		if (on_shared_chan(s) && (t < 0 || t > SHARED_SLICE_MS))
			t = SHARED_SLICE_MS;    /* see do_poll */
		if (R(poll)(&p, 1, t) < 0 && errno == EINTR)
			return -EINTR;
	}
}

static int iov_rest(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *rest);

/* Run one shared-memory call, honouring the socket's timeout.  As in
 * tcp_sendmsg / tcp_recvmsg the timeout bounds the call's waiting in all
 * (it does not restart with progress); a send, or a MSG_WAITALL receive,
 * that has moved some bytes when it runs out (or meets an error or the
 * end) returns that much. */
static ssize_t shm_call(int fd, struct sc_sock *s, bool tx, int f,
			ssize_t (*op)(struct sc_conn *, const struct iovec *, int, int),
			const struct iovec *iov, int iovcnt)
{
	uint64_t to = tx ? s->sndtimeo_ns : s->rcvtimeo_ns;
	if (!to || (f & SC_NONBLOCK))
		return op(s->c, iov, iovcnt, f);
	/* a peek looks at the same bytes again: it never accumulates */
	bool all = tx || ((f & SC_WAITALL) && !(f & SC_PEEK));
	size_t total = 0, done = 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	uint64_t deadline = now_ns() + to;
	if (!tx && (f & SC_PEEK) && (f & SC_WAITALL) && total) {
		/* a waiting peek: the whole length (or the end), within the
		 * timeout; then what there is */
		int64_t want = total < s->c->rx.size ? (int64_t)total : (int64_t)s->c->rx.size;
		ssize_t rc = op(s->c, iov, iovcnt, f | SC_NONBLOCK);
		if (rc != -EAGAIN && (rc < 0 || rc >= want || rc == 0))
			return rc;
		int w = sc__conn_wait_avail(s->c, want, deadline);
		if (w < 0 && w != -ETIMEDOUT)
			return w;
		rc = op(s->c, iov, iovcnt, f | SC_NONBLOCK);
		return rc == -EAGAIN && w == -ETIMEDOUT ? -EAGAIN : rc;
	}
	struct iovec rest[IOV_MAX];
	for (;;) {
		const struct iovec *v = iov;
		int k = iovcnt;
		if (done) {
			k = iov_rest(iov, iovcnt, done, rest);
			v = rest;
		}
		ssize_t rc = op(s->c, v, k, f | SC_NONBLOCK);
		if (rc > 0) {
			done += (size_t)rc;
			if (!all || done >= total)
				return (ssize_t)done;
			continue;
		}
		if (rc == 0 && total)
			return (ssize_t)done;           /* the end */
		if (rc != -EAGAIN)
			return done ? (ssize_t)done : rc;
		/* sleep on the connection's own wake-up (as a blocking call
		 * does, whatever channel it is bound to); a signal ends a
		 * timed socket call with EINTR, as in the kernel */
		int w = sc__conn_wait_ready(s->c, tx, deadline);
		if (w == -ETIMEDOUT)
			return done ? (ssize_t)done : -EAGAIN;
		if (w < 0)
			return done ? (ssize_t)done : w;
	}
}

static ssize_t sendv_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	return sc_sendv(c, iov, n, f);
}

static ssize_t recvv_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	return sc_recvv(c, iov, n, f);
}

/* recv with MSG_TRUNC: TCP discards the bytes instead of copying them (the
 * buffer may be NULL; only the lengths count).  With MSG_PEEK it reports how
 * many there are, up to the length, and leaves them. */
static ssize_t trunc_op(struct sc_conn *c, const struct iovec *iov, int n, int f)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	char local[16384];
	size_t cap = f & SC_PEEK ? total : sizeof(local);
	if (cap > sizeof(local) && cap > (8u << 20))
		cap = 8u << 20;         /* no ring is larger */
	char *buf = cap <= sizeof(local) ? local : malloc(cap);
	if (!buf)
		return -ENOMEM;
	ssize_t done = 0;
	while ((size_t)done < total) {
		size_t want = total - (size_t)done;
		struct iovec v = { buf, want < cap ? want : cap };
		/* the first part as asked; more only if it is there already
		 * (or WAITALL asks for all of it) */
		ssize_t rc = sc_recvv(c, &v, 1, done && !(f & SC_WAITALL) ? f | SC_NONBLOCK : f);
		if (rc <= 0) {
			if (!done)
				done = rc;
			break;
		}
		done += rc;
		if (f & SC_PEEK)
			break;
	}
	if (buf != local)
		free(buf);
	return done;
}

/* iov without its first skip bytes, in rest (IOV_MAX entries); returns
 * the count. */
static int iov_rest(const struct iovec *iov, int iovcnt, size_t skip, struct iovec *rest)
{
	int k = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		rest[k].iov_base = (char *)iov[i].iov_base + skip;
		rest[k++].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	return k;
}

/* A switch back to TCP is under way on c (ours or the peer's): a blocking
 * call it cut short goes on over TCP. */
static bool switching(struct sc_conn *c)
{
	return atomic_load(&c->sw) != SC_SW_NONE ||
	       (atomic_load_explicit(&c->peer->flags, memory_order_acquire) & SC_SF_FROZEN) ||
	       (atomic_load(&c->lflags) & SC_LF_DEATH_SWITCH);
}

/* Bytes a connection of ours moved over TCP. */
static void tcp_count(struct sc_sock *s, bool tx, ssize_t n)
{
	if (n <= 0 || !s->counted)
		return;
	if (tx)
		SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
	else
		SC_STAT_ADD(bytes_tcp_received, (uint64_t)n);
	if (s->rec)
		rec_add(tx ? &s->rec->bytes_sent : &s->rec->bytes_received, n);
}

static ssize_t do_sendv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, ssize_t (*tcp)(int, const struct iovec *, int, int))
{
	if (atomic_load_explicit(&s->mode, memory_order_relaxed) == M_SPENDING)
		server_settle(fd, s);
	size_t total = 0;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;

	if (atomic_load_explicit(&s->mode, memory_order_acquire) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		ssize_t n = 0;
		if (atomic_load(&s->mode) == M_PENDING) {
			if (atomic_load(&s->attached))
				pending_settle(fd, s, false, 0);
			if (atomic_load(&s->mode) == M_PENDING) {
				n = pending_send(fd, s, iov, iovcnt, flags);
				if (s->rec)
					rec_add(&s->rec->bytes_sent, n);
				if ((size_t)n < total && n == 0) {
					/* buffer full: wait for the claim like a
					 * full socket buffer */
					if (s->nonblock || (flags & MSG_DONTWAIT)) {
						pthread_mutex_unlock(&s->lock);
						errno = EAGAIN;
						return -1;
					}
					pending_settle(fd, s, true, -1);
				}
			}
		}
		bool block = !(s->nonblock || (flags & MSG_DONTWAIT));
		if (n > 0 && (size_t)n < total && block) {
			/* a blocking send is not cut short by the buffer's
			 * size: wait for the claim, then send the rest */
			pending_settle(fd, s, true, -1);
			pthread_mutex_unlock(&s->lock);
			struct iovec rest[IOV_MAX];
			int k = iov_rest(iov, iovcnt, (size_t)n, rest);
			ssize_t more = do_sendv(fd, s, rest, k, flags, tcp);
			return more > 0 ? n + more : n;
		}
		pthread_mutex_unlock(&s->lock);
		if (n > 0 || total == 0)
			return n;
	}
	int mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	if (mode == M_SHM && s->owner == my_pid && (flags & MSG_OOB)) {
		/* urgent data is TCP's: the connection goes back to it (after
		 * every byte sent before), and the kernel marks the byte */
		sock_switch(fd, s);
		mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	}
	if (mode == M_SHM && s->owner == my_pid) {
		int f = sc_flags(s, flags, false);
		if (f < 0) {
			errno = -f;
			return -1;
		}
		ssize_t rc = shm_call(fd, s, true, f, sendv_op, iov, iovcnt);
		if (s->rec)
			rec_add(&s->rec->bytes_sent, rc);
		if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && !(f & SC_NONBLOCK) &&
					    switching(s->c))) {
			/* the connection went back to TCP (an exec, the peer):
			 * the rest goes there */
			if (sock_switch(fd, s) < 0) {
				errno = ENOTCONN;
				return -1;
			}
			if (rc > 0) {
				struct iovec rest[IOV_MAX];
				int k = iov_rest(iov, iovcnt, (size_t)rc, rest);
				tcp_gate(s);
				ssize_t more = tcp(fd, rest, k, flags);
				if (more > 0)
					tcp_count(s, true, more);
				return rc + (more > 0 ? more : 0);
			}
			goto tcp;
		}
		if (rc == -EPIPE && !s->shut_wr && !s->sent_to_closed) {
			/* TCP: the first send to a peer that closed succeeds
			 * (the peer answers it with a reset); then EPIPE */
			s->sent_to_closed = true;
			return (ssize_t)total;
		}
		if (rc == -ECONNRESET) {
			/* reported once, as sk_err; then the socket is dead */
			if (s->err_reported)
				rc = -EPIPE;
			s->err_reported = true;
		}
		return shm_result(rc, flags, true);
	}
	if (mode == M_SHM && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;       /* inherited, and its owner did not switch it */
		return -1;
	}
tcp:;
	tcp_gate(s);                    /* switched: after the re-send */
	ssize_t n = tcp(fd, iov, iovcnt, flags);
	tcp_count(s, true, n);
	return n;
}

static ssize_t do_recvv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt,
			int flags, ssize_t (*tcp)(int, const struct iovec *, int, int))
{
	if (atomic_load_explicit(&s->mode, memory_order_relaxed) == M_SPENDING)
		server_settle(fd, s);
	if (atomic_load_explicit(&s->mode, memory_order_acquire) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		int rc = pending_settle(fd, s, !(s->nonblock || (flags & MSG_DONTWAIT)), -1);
		pthread_mutex_unlock(&s->lock);
		if (rc == -EAGAIN) {
			errno = EAGAIN;
			return -1;
		}
	}
	int mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	if (mode == M_SHM && s->owner == my_pid && (flags & MSG_OOB)) {
		/* a connection on shared memory has no urgent byte (a sender
		 * of one switches to TCP first): the kernel's answer is
		 * EINVAL, unless the peer's switch is under way */
		if (!switching(s->c)) {
			errno = EINVAL;
			return -1;
		}
		sock_switch(fd, s);
		mode = atomic_load_explicit(&s->mode, memory_order_acquire);
	}
	if (mode == M_SHM && s->owner == my_pid) {
		int f = sc_flags(s, flags, true);
		if (f < 0) {
			errno = -f;
			return -1;
		}
		size_t total = 0;
		for (int i = 0; i < iovcnt; i++)
			total += iov[i].iov_len;
		if (!total) {
			/* as TCP: nothing to read yet is EAGAIN, else 0 */
			if ((f & SC_NONBLOCK) && !(sc_conn_events(s->c) & (SC_EV_IN | SC_EV_ERR))) {
				errno = EAGAIN;
				return -1;
			}
			return 0;
		}
		/* SO_RCVLOWAT: the blocking receive waits in the core; with
		 * SO_RCVTIMEO (polled here) wait for the mark first, and at
		 * the timeout take what there is */
		s->c->rcvlowat = s->rcvlowat > 1 ? (uint32_t)s->rcvlowat : 0;
		if (s->rcvlowat > 1 && s->rcvtimeo_ns && !(f & (SC_NONBLOCK | SC_WAITALL | SC_PEEK))) {
			uint64_t dl = now_ns() + s->rcvtimeo_ns;
			int64_t want = lowat_target(s, total);
			if (rx_avail(s->c) < want)
				want = lowat_target(s, SIZE_MAX);
			while (rx_avail(s->c) < want && !switching(s->c) &&
			       !(sc_conn_events(s->c) & (SC_EV_RDHUP | SC_EV_HUP | SC_EV_ERR))) {
				int w = shm_wait_until(fd, s, false, dl);
				if (w == -EINTR) {
					errno = EINTR;  /* a socket timeout: never restarted */
					return -1;
				}
				if (w < 0) {
					f |= SC_NONBLOCK;       /* timed out */
					break;
				}
			}
		}
		ssize_t rc = shm_call(fd, s, false, f, flags & MSG_TRUNC ? trunc_op : recvv_op,
				      iov, iovcnt);
		if (rc == -SC_ESWITCHED || (rc > 0 && (size_t)rc < total && (f & SC_WAITALL) &&
					    switching(s->c))) {
			/* the connection went back to TCP: the rest comes from
			 * there (what the peer had sent us is re-sent first) */
			if (sock_switch(fd, s) < 0) {
				errno = ENOTCONN;
				return -1;
			}
			if (rc > 0) {
				if (s->rec)
					rec_add(&s->rec->bytes_received, rc);
				struct iovec rest[IOV_MAX];
				int k = iov_rest(iov, iovcnt, (size_t)rc, rest);
				ssize_t more = tcp(fd, rest, k, flags);
				if (more > 0)
					tcp_count(s, false, more);
				return rc + (more > 0 ? more : 0);
			}
			goto tcp;
		}
		if (atomic_load_explicit(&nexp_sig, memory_order_relaxed) && rc > 0)
			ep_refresh_exposed();   /* a nested set may not be ready now */
		if (s->rec && !(f & SC_PEEK))
			rec_add(&s->rec->bytes_received, rc);
		if (rc == -ECONNRESET) {
			if (s->err_reported)
				rc = 0;
			s->err_reported = true;
		}
		return shm_result(rc, flags, false);
	}
	if (mode == M_SHM && sw_request_owner(fd, s) < 0) {
		errno = ENOTCONN;
		return -1;
	}
tcp:;
	ssize_t n = tcp(fd, iov, iovcnt, flags);
	if (!(flags & MSG_PEEK))
		tcp_count(s, false, n);
	return n;
}

static ssize_t tcp_sendv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return R(sendmsg)(fd, &m, flags);
}
static ssize_t tcp_recvv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return R(recvmsg)(fd, &m, flags);
}
static ssize_t tcp_writev(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return R(writev)(fd, iov, iovcnt);
}
static ssize_t tcp_readv(int fd, const struct iovec *iov, int iovcnt, int flags)
{
	return R(readv)(fd, iov, iovcnt);
}

EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(write)(fd, buf, len);
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, 0, tcp_writev);
}

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(send)(fd, buf, len, flags);
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, flags, tcp_sendv);
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
		      const struct sockaddr *to, socklen_t tolen)
{
	struct sc_sock *s = sock_get(fd);
	if (s && (flags & MSG_FASTOPEN) && atomic_load(&s->mode) == M_TCP && !s->counted) {
		/* data in the SYN: shared memory cannot take part */
		ssize_t n = R(sendto)(fd, buf, len, flags, to, tolen);
		if (n >= 0 || errno == EINPROGRESS)
			fallback_stat(s, fd, SC_FB_UNSUPPORTED);
		return n;
	}
	if (!s || (to && atomic_load(&s->mode) == M_TCP))
		return R(sendto)(fd, buf, len, flags, to, tolen);
	/* a connected TCP socket ignores the address (EISCONN only for
	 * MSG_FASTOPEN-style use, which we decline) */
	struct iovec v = { (void *)buf, len };
	return do_sendv(fd, s, &v, 1, flags, tcp_sendv);
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(writev)(fd, iov, iovcnt);
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return do_sendv(fd, s, iov, iovcnt, 0, tcp_writev);
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	/* accelerated fds passed to another process go back to TCP first:
	 * the receiver reads the kernel socket */
	sw_rights(m);
	struct sc_sock *s = sock_get(fd);
	if (!s || atomic_load(&s->mode) == M_TCP || m->msg_controllen) {
		tcp_gate(s);
		return R(sendmsg)(fd, m, flags);
	}
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	return do_sendv(fd, s, m->msg_iov, (int)m->msg_iovlen, flags, tcp_sendv);
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	for (unsigned int i = 0; v && i < n; i++)
		sw_rights(&v[i].msg_hdr);
	struct sc_sock *s = sock_get(fd);
	if (!s || atomic_load(&s->mode) == M_TCP) {
		tcp_gate(s);
		return R(sendmmsg)(fd, v, n, flags);
	}
	unsigned int i;
	for (i = 0; i < n; i++) {
		ssize_t r = sendmsg(fd, &v[i].msg_hdr, flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
	}
	return (int)i;
}

EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(read)(fd, buf, len);
	struct iovec v = { buf, len };
	return do_recvv(fd, s, &v, 1, 0, tcp_readv);
}

EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		return R(__read_chk)(fd, buf, len, buflen);   /* aborts */
	return read(fd, buf, len);
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(recv)(fd, buf, len, flags);
	struct iovec v = { buf, len };
	return do_recvv(fd, s, &v, 1, flags, tcp_recvv);
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		return R(__recv_chk)(fd, buf, len, buflen, flags);
	return recv(fd, buf, len, flags);
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
			socklen_t *fromlen)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvfrom)(fd, buf, len, flags, from, fromlen);
	struct iovec v = { buf, len };
	ssize_t n = do_recvv(fd, s, &v, 1, flags, tcp_recvv);
	if (n >= 0 && from && fromlen)
		*fromlen = 0;           /* TCP: no address */
	return n;
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
			      struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen)
		return R(__recvfrom_chk)(fd, buf, len, buflen, flags, from, fromlen);
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(readv)(fd, iov, iovcnt);
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	return do_recvv(fd, s, iov, iovcnt, 0, tcp_readv);
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvmsg)(fd, m, flags);
	if (m->msg_iovlen > IOV_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	ssize_t n = do_recvv(fd, s, m->msg_iov, (int)m->msg_iovlen, flags, tcp_recvv);
	if (n >= 0) {
		m->msg_controllen = 0;
		m->msg_flags = 0;
		m->msg_namelen = 0;
	}
	return n;
}

EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
		    struct timespec *timeout)
{
	struct sc_sock *s = sock_get(fd);
	if (!s || atomic_load(&s->mode) == M_TCP)
		return R(recvmmsg)(fd, v, n, flags, timeout);
	unsigned int i;
	for (i = 0; i < n; i++) {
		ssize_t r = recvmsg(fd, &v[i].msg_hdr, i ? flags | MSG_DONTWAIT : flags);
		if (r < 0)
			return i ? (int)i : -1;
		v[i].msg_len = (unsigned int)r;
		if (r == 0)
			break;
	}
	return (int)i;
}

/* sendfile from a file into an accelerated socket: read, then send. */
EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct sc_sock *s = sock_get(out);
	if (!s || atomic_load(&s->mode) == M_TCP) {
		tcp_gate(s);
		ssize_t n = R(sendfile)(out, in, off, count);
		if (s && n > 0 && s->counted)
			SC_STAT_ADD(bytes_tcp_sent, (uint64_t)n);
		return n;
	}
	/* the source must be a file: with an offset, pread says so itself
	 * (ESPIPE for a socket or pipe); without, ask once */
	struct stat ist;
	if (!off && fstat(in, &ist) < 0)
		return -1;
	if (!off && !S_ISREG(ist.st_mode) && !S_ISBLK(ist.st_mode)) {
		errno = EINVAL;         /* the kernel's answer for a non-file */
		return -1;
	}
	char buf[65536];
	size_t done = 0;
	off_t pos = off ? *off : 0;
	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t r = off ? pread(in, buf, want, pos) : R(read)(in, buf, want);
		if (r < 0) {
			if (errno == ESPIPE)
				errno = EINVAL;
			if (done)
				break;
			return -1;
		}
		if (r == 0)
			break;
		ssize_t w = send(out, buf, (size_t)r, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EPIPE)
				raise(SIGPIPE);
			if (done) {
				errno = 0;
				break;
			}
			if (!off && r > 0)
				lseek(in, -r, SEEK_CUR);
			return -1;
		}
		if (!off && w < r)
			lseek(in, w - r, SEEK_CUR);
		done += (size_t)w;
		pos += w;
		if (w < r)
			break;
	}
	if (off)
		*off = pos;
	return (ssize_t)done;
}

EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
	__attribute__((alias("sendfile")));

/* splice to or from an accelerated socket: the bytes must go through the
 * ring, not the kernel socket (the peer reads the ring).  One bounce buffer. */
EXPORT ssize_t splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
		      unsigned int flags)
{
	static __typeof__(splice) *real_splice;
	if (!real_splice)
		real_splice = (__typeof__(splice) *)dlsym(RTLD_NEXT, "splice");
	struct sc_sock *so = sock_get(out), *si = sock_get(in);
	bool to_shm = so && atomic_load(&so->mode) >= M_SPENDING;
	bool from_shm = si && atomic_load(&si->mode) >= M_SPENDING;
	if (!to_shm && !from_shm) {
		tcp_gate(so);
		return real_splice(in, off_in, out, off_out, len, flags);
	}
	if ((to_shm && off_out) || (from_shm && off_in)) {
		errno = EINVAL;         /* sockets have no offset (no pread/pwrite) */
		return -1;
	}
	char buf[65536];
	size_t want = len < sizeof(buf) ? len : sizeof(buf);
	int mflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
	ssize_t r = from_shm ? recv(in, buf, want, mflags)
			     : off_in ? pread(in, buf, want, *off_in) : R(read)(in, buf, want);
	if (r <= 0)
		return r;
	ssize_t w = 0;
	while (w < r) {
		ssize_t n = to_shm ? send(out, buf + w, (size_t)(r - w), MSG_NOSIGNAL)
				   : off_out ? pwrite(out, buf + w, (size_t)(r - w), *off_out + w)
					     : R(write)(out, buf + w, (size_t)(r - w));
		if (n < 0) {
			if (w)
				break;
			return -1;      /* read bytes are lost, as with a failed splice */
		}
		w += n;
	}
	if (off_in)
		*off_in += r;
	if (off_out)
		*off_out += w;
	return w;
}

/* ---- switching back to TCP ----------------------------------------------
 *
 * An accelerated fd about to reach code that will not use our table (an
 * exec'd image, another process through SCM_RIGHTS) goes back to plain TCP
 * first, at a clean cut: each side freezes its half (no more ring reads or
 * writes; its consumed cursor final), then re-sends on the kernel socket
 * the bytes of its ring the other side never read, and both carry on over
 * TCP (conn.h).  The peer's half is switched by our switch thread when its
 * SWITCH message arrives (the control thread may not block), or by any call
 * of the program's that meets the peer's freeze first.
 */

#define SW_WAIT_NS      (5ull * 1000000000u)    /* for the peer to freeze */
#define SW_SEND_MS      30000                   /* to re-send on TCP */
#define SW_EXIT_MS      5000                    /* exit waits for switches under way */

static struct {
	pthread_mutex_t lock;
	int efd;                /* kicks the switch thread */
	bool running;
	_Atomic bool started;   /* running (read without the lock) */
	int ino;                /* its inotify on the run directory */
} SW = { .lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1, .ino = -1 };

/* Re-send [from, to) of c's send ring on fd (the kernel socket).  Blocks,
 * within SW_SEND_MS, while the kernel's buffers are full.  Returns the
 * bytes that could not be sent. */
static uint64_t sw_resend(int fd, struct sc_conn *c, uint64_t from, uint64_t to, int max_ms)
{
	uint64_t end = max_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)max_ms * 1000000u;
	while (from < to) {
		uint32_t pos = (uint32_t)(from & (c->tx.size - 1));
		size_t n = c->tx.size - pos;
		if (n > to - from)
			n = (size_t)(to - from);
		ssize_t k = R(send)(fd, c->tx.data + pos, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			from += (uint64_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		uint64_t now = now_ns();
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || now >= end)
			break;  /* the connection is gone: nothing reads it */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		R(poll)(&p, 1, end == UINT64_MAX ? 1000 : (int)((end - now) / 1000000u) + 1);
	}
	return to - from;
}

/* fds of ours that name a program's kernel socket (re-sends, the switch
 * thread's batch): a fork child must not keep them (its peer would wait
 * for their close to see EOF) */
static pthread_mutex_t hidden_lock = PTHREAD_MUTEX_INITIALIZER;
static int hidden[64], nhidden;

static void hidden_add(int fd)
{
	pthread_mutex_lock(&hidden_lock);
	if (nhidden < 64)
		hidden[nhidden++] = fd;
	pthread_mutex_unlock(&hidden_lock);
}

static void hidden_del(int fd)
{
	pthread_mutex_lock(&hidden_lock);
	for (int i = 0; i < nhidden; i++)
		if (hidden[i] == fd) {
			hidden[i] = hidden[--nhidden];
			break;
		}
	pthread_mutex_unlock(&hidden_lock);
}

/* In a fork child: close the parent's hidden fds. */
static void hidden_atfork_child(void)
{
	pthread_mutex_init(&hidden_lock, NULL);
	for (int i = 0; i < nhidden; i++)
		R(close)(hidden[i]);
	nhidden = 0;
}

/* Drop a reference taken on s (the last frees it). */
static void sock_unref(struct sc_sock *s)
{
	pthread_mutex_lock(&table_lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&table_lock);
	if (last)
		sock_release(s, -1);
}

/* The re-send of a switch: what the peer never read of ours, then the
 * bytes a client buffered before its connection was set up that never
 * reached the ring (the peer froze first). */
struct sw_job {
	struct sc_sock *s;
	struct sc_conn *c;
	int kfd;
	uint64_t from, to;
	char *pbuf;
	size_t plen;
	bool fin;               /* we shut down writing: our FIN goes after */
	uint64_t lost;
};

/* Send what there is to send, waiting up to max_ms (-1: as long as it
 * takes, 0: not at all); true when all of it went (or cannot go). */
static bool sw_job_run(struct sw_job *j, int max_ms)
{
	if (j->kfd < 0) {
		j->lost = j->to - j->from + j->plen;
		return true;
	}
	uint64_t left = sw_resend(j->kfd, j->c, j->from, j->to, max_ms);
	j->from = j->to - left;
	if (left && max_ms != 0) {
		j->lost = left;         /* gone, or the exec could not wait */
		return true;
	}
	if (left)
		return false;
	while (j->plen) {
		ssize_t n = R(send)(j->kfd, j->pbuf, j->plen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			memmove(j->pbuf, j->pbuf + n, j->plen - (size_t)n);
			j->plen -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (max_ms == 0)
				return false;
			struct pollfd p = { .fd = j->kfd, .events = POLLOUT };
			R(poll)(&p, 1, 1000);
			continue;
		}
		j->lost += j->plen;
		break;
	}
	return true;
}

/* The re-send is done: ONTCP (a child waiting to write sees it only now),
 * our sends go on, the references go. */
static void sw_job_finish(struct sw_job *j, bool heap)
{
	struct sc_sock *s = j->s;
	if (j->kfd >= 0 && j->fin)
		R(shutdown)(j->kfd, SHUT_WR);   /* our FIN, held back till now */
	if (j->kfd >= 0) {
		hidden_del(j->kfd);
		R(close)(j->kfd);
	}
	free(j->pbuf);
	sc__switch_done(j->c);
	pthread_mutex_lock(&s->wlock);
	atomic_store(&s->resending, false);
	pthread_cond_broadcast(&s->wcond);
	pthread_mutex_unlock(&s->wlock);
	if (j->lost)
		LOG(1, "switch to TCP: %llu bytes the peer had not read are lost (%s)",
		    (unsigned long long)j->lost, "the connection is gone");
	else
		LOG(1, "connection switched back to TCP");
	sock_unref(s);
	if (heap)
		free(j);
}

/* Switches under way in other threads (a re-send in a thread of its own,
 * an orphan): the process's exit waits for them (sw_atexit). */
static _Atomic int sw_inflight;

static void *sw_job_main(void *arg)
{
	struct sw_job *j = arg;
	sw_job_run(j, -1);
	sw_job_finish(j, true);
	atomic_fetch_sub(&sw_inflight, 1);
	return NULL;
}

/* A re-send the kernel does not take at once gets a thread of its own (it
 * waits for the peer to read: one slow peer must hold up nothing else). */
static void sw_job_thread(struct sw_job *j)
{
	pthread_t t;
	pthread_attr_t a;
	sigset_t all, old;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_fetch_add(&sw_inflight, 1);
	int rc = pthread_create(&t, &a, sw_job_main, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc) {
		atomic_fetch_sub(&sw_inflight, 1);
		sw_job_run(j, -1);
		sw_job_finish(j, true);
	}
}

/* Before a send (or a FIN, or the fd leaving) on a socket switched back
 * to TCP: the re-send goes first.  In a process that inherited it across
 * fork, the owner's re-send: its ONTCP. */
static void tcp_gate(struct sc_sock *s)
{
	if (!s || !s->c || !atomic_load_explicit(&s->resending, memory_order_acquire))
		return;
	if (s->owner != my_pid) {
		uint64_t dl = now_ns() + 30000000000ull;
		while (!(atomic_load_explicit(&s->c->me->flags, memory_order_acquire) & SC_SF_ONTCP) &&
		       now_ns() < dl)
			usleep(200);
		atomic_store(&s->resending, false);
		return;
	}
	pthread_mutex_lock(&s->wlock);
	while (atomic_load(&s->resending))
		pthread_cond_wait(&s->wcond, &s->wlock);
	pthread_mutex_unlock(&s->wlock);
}

/* Switch s (an accelerated connection of ours named by fd) back to TCP.
 * Freezes our half, then waits up to wait_ns for the peer's; once both
 * are frozen the socket is TCP for readers at once (what the peer never
 * read of ours is re-sent by it), while writers wait on s->wlock until
 * we re-sent what the peer never read (for up to resend_ms; -1: as long
 * as it takes, as a kernel send would).  Returns 1 when switched (or not
 * ours to switch any more), 0 if the peer has not frozen yet (our half
 * stays frozen: the peer's SWITCH brings the switch thread back), or
 * -ENOTCONN for a connection another process owns. */
static int sock_switch_(int fd, struct sc_sock *s, uint64_t wait_ns, int resend_ms)
{
	int saved = errno;
	pthread_mutex_lock(&s->lock);
	struct sc_conn *c = s->c;
	if (atomic_load(&s->mode) != M_SHM || s->owner != my_pid || !c) {
		int mode = atomic_load(&s->mode);
		pthread_mutex_unlock(&s->lock);
		errno = saved;
		return mode == M_SHM ? -ENOTCONN : 1;
	}
	sc__lock(&c->txlock);
	sc__lock(&c->rxlock);
	sc__switch_freeze(c);
	sc__unlock(&c->rxlock);
	sc__unlock(&c->txlock);
	/* (our calls on it meanwhile find it frozen and wait for s->lock) */
	uint64_t from, to, dl = now_ns() + wait_ns;
	unsigned us = 20;
	bool ready;
	while (!(ready = sc__switch_range(c, &from, &to)) && now_ns() < dl) {
		usleep(us);
		if (us < 2000)
			us *= 2;
	}
	if (!ready) {
		pthread_mutex_unlock(&s->lock);
		errno = saved;
		return 0;
	}
	/* the re-send: our own fd for it (the program may close its fd once
	 * we let go of s->lock), and a reference on s */
	struct sw_job *j = calloc(1, sizeof(*j));
	int kfd = from != to || s->plen || s->shut_wr ? R(fcntl)(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (kfd >= 0)
		hidden_add(kfd);
	pthread_mutex_lock(&table_lock);
	s->refs++;
	pthread_mutex_unlock(&table_lock);
	if (j) {
		*j = (struct sw_job){ .s = s, .c = c, .kfd = kfd, .from = from, .to = to,
				      .pbuf = s->pbuf, .plen = s->plen, .fin = s->shut_wr };
		s->pbuf = NULL;
		s->plen = 0;
	}
	atomic_store(&s->resending, true);      /* sends wait (tcp_gate) */
	atomic_store_explicit(&s->mode, M_TCP, memory_order_release);
	/* the kernel's epoll sets watch it from now on (at once: a process
	 * sharing a set with us may be waiting in it) */
	ep_switched(s, atomic_load(&c->sw_child_set));
	/* pollers and epoll sets look again: readers go on over TCP now,
	 * while we re-send (the peer may have to read for it to go) */
	pthread_mutex_lock(&c->g->lock);
	sc__notify_self(c);
	pthread_mutex_unlock(&c->g->lock);
	SC_STAT_ADD(fallback[SC_FB_SWITCHED], 1);
	if (s->rec) {
		s->rec->reason = SC_FB_SWITCHED + 1;
		atomic_store_explicit(&s->rec->mode, SC_REC_TCP, memory_order_release);
	}
	pthread_mutex_unlock(&s->lock);
	if (!j) {
		/* no memory for the job: do it here */
		struct sw_job local = { .s = s, .c = c, .kfd = kfd, .from = from, .to = to,
					.fin = s->shut_wr };
		sw_job_run(&local, resend_ms);
		sw_job_finish(&local, false);
	} else if (resend_ms >= 0 || sw_job_run(j, 0)) {
		/* an exec waits (the thread would not survive it); else
		 * done at once */
		if (resend_ms >= 0)
			sw_job_run(j, resend_ms);
		sw_job_finish(j, true);
	} else {
		sw_job_thread(j);
	}
	errno = saved;
	return 1;
}

/* A program's call that needs the switch done: wait for the peer as long
 * as it takes (as a call on a socket whose peer is stopped would). */
static int sock_switch(int fd, struct sc_sock *s)
{
	int rc;
	while ((rc = sock_switch_(fd, s, SW_WAIT_NS, -1)) == 0)
		;
	return rc < 0 ? rc : 0;
}

/* Connections closed by the program while a child may hold them (see
 * sock_release): the switch thread finishes their switch, then frees
 * them.  Each holds its own fd for the kernel socket. */
static struct sw_orphan {
	struct sc_sock *s;
	int fd;
	struct sw_orphan *next;
} *sw_orphans;

static void sw_orphans_run(void)
{
	pthread_mutex_lock(&SW.lock);
	struct sw_orphan *list = sw_orphans;
	sw_orphans = NULL;
	pthread_mutex_unlock(&SW.lock);
	while (list) {
		struct sw_orphan *o = list;
		list = o->next;
		if (sock_switch_(o->fd, o->s, 0, -1) == 0) {
			pthread_mutex_lock(&SW.lock);   /* the peer's SWITCH brings us back */
			o->next = sw_orphans;
			sw_orphans = o;
			pthread_mutex_unlock(&SW.lock);
			continue;
		}
		hidden_del(o->fd);
		R(close)(o->fd);
		sock_unref(o->s);
		free(o);
		atomic_fetch_sub(&sw_inflight, 1);
	}
}

/* Hand s (its last fd being closed) to the switch thread; false if it
 * cannot take it (then it closes as usual). */
static bool sw_orphan(int fd, struct sc_sock *s)
{
	struct sw_orphan *o = malloc(sizeof(*o));
	int kfd = o ? R(fcntl)(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (kfd < 0) {
		free(o);
		return false;
	}
	o->s = s;
	o->fd = kfd;
	hidden_add(kfd);
	pthread_mutex_lock(&table_lock);
	s->refs = 1;            /* the orphan's own (sock_unref frees it) */
	pthread_mutex_unlock(&table_lock);
	sw_ask(s->c);
	atomic_fetch_add(&sw_inflight, 1);
	pthread_mutex_lock(&SW.lock);
	o->next = sw_orphans;
	sw_orphans = o;
	pthread_mutex_unlock(&SW.lock);
	sw_kick();
	return true;
}

/* Switch every accelerated connection of ours that wants it: asked by the
 * peer or frozen and waiting for the peer (the switch thread: block
 * false, it does not wait), or all of them (all: before an exec, which
 * waits).  No lock held. */
static void sw_scan(bool all, bool cloexec_too, bool block)
{
	size_t n = 0, cap = 0;
	struct sw_item { struct sc_sock *s; int fd; } *batch = NULL;
	pthread_mutex_lock(&table_lock);
	for (int p = 0; p < NPAGES; p++) {
		struct sc_sock *_Atomic *pg = atomic_load(&pages[p]);
		if (!pg)
			continue;
		for (int i = 0; i < (1 << PAGE_BITS); i++) {
			struct sc_sock *s = atomic_load(&pg[i]);
			int fd = (p << PAGE_BITS) | i;
			if (!s || atomic_load(&s->mode) != M_SHM || s->owner != my_pid || !s->c)
				continue;
			int sw = atomic_load(&s->c->sw);
			if (!all && sw != SC_SW_ASKED && sw != SC_SW_FROZEN)
				continue;
			if (!cloexec_too && (R(fcntl)(fd, F_GETFD) & FD_CLOEXEC))
				continue;
			bool dup = false;
			for (size_t j = 0; j < n && !dup; j++)
				dup = batch[j].s == s;
			if (dup)
				continue;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 32;
				void *q = realloc(batch, nc * sizeof(*batch));
				if (!q)
					break;
				batch = q;
				cap = nc;
			}
			/* our own fd for the kernel socket: the program may
			 * close its fd meanwhile */
			int kfd = R(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
			if (kfd < 0)
				continue;
			hidden_add(kfd);
			s->refs++;
			batch[n].s = s;
			batch[n++].fd = kfd;
		}
	}
	pthread_mutex_unlock(&table_lock);
	for (size_t j = 0; j < n; j++) {
		if (block) {
			/* an exec: waits, but not for ever for a peer that
			 * does not answer or read */
			if (sock_switch_(batch[j].fd, batch[j].s, SW_WAIT_NS, SW_SEND_MS) == 0)
				LOG(1, "exec: the peer of a connection did not answer; it stays on "
				    "shared memory, which the new image cannot read");
		} else {
			sock_switch_(batch[j].fd, batch[j].s, 0, -1);
		}
		hidden_del(batch[j].fd);
		R(close)(batch[j].fd);
		sock_unref(batch[j].s);
	}
	free(batch);
}

static void *sw_main(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* the kill switch: its file appearing in the run directory */
	int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (ino >= 0 && (!sc__rundir() ||
			 inotify_add_watch(ino, sc__rundir(), IN_CREATE | IN_MOVED_TO) < 0)) {
		R(close)(ino);
		ino = -1;
	}
	SW.ino = ino;
	bool look = true;
	for (;;) {
		if (look && off_file())
			sw_scan(true, true, false);
		look = false;
		struct pollfd p[2] = { { .fd = SW.efd, .events = POLLIN },
				       { .fd = ino, .events = POLLIN } };
		/* orphans waiting for a peer that may close instead of
		 * freezing (no SWITCH then): looked at every second */
		int rc = R(poll)(p, 2, sw_orphans ? 1000 : -1);
		if (rc < 0)
			continue;
		if (rc == 0) {
			sw_orphans_run();
			continue;
		}
		char buf[4096];
		if (p[1].revents) {
			while (R(read)(ino, buf, sizeof(buf)) > 0)
				;
			look = true;
		}
		uint64_t v;
		if (p[0].revents && R(read)(SW.efd, &v, sizeof(v)) > 0) {
			sw_scan(off_file(), true, false);
			sw_orphans_run();
		}
	}
	return NULL;
}

/* Is the kill switch on (`shortcut off`)?  One access() per call: asked
 * when a connection is set up, never on the data path. */
static char off_path[PATH_MAX];
static pthread_once_t off_once = PTHREAD_ONCE_INIT;
static void off_init(void)
{
	if (sc__rundir())
		snprintf(off_path, sizeof(off_path), "%s/%s", sc__rundir(), SC_OFF_FILE);
}

static bool off_file(void)
{
	pthread_once(&off_once, off_init);
	int saved = errno;
	bool on = off_path[0] && access(off_path, F_OK) == 0;
	errno = saved;
	return on;
}

/* The switch thread runs while we have accelerated connections (it
 * watches the kill switch); started with the first one. */
static void sw_start(void)
{
	if (!atomic_load_explicit(&SW.started, memory_order_relaxed)) {
		/* a child of ours reaches us there to ask for a switch
		 * (sc__kick_owner), whatever fds it closed */
		rdv_ensure();
		sw_kick();
	}
}

/* exit(): the switches under way in our threads finish first (an owner
 * that closed a connection a child holds and then exits would otherwise
 * leave the bytes the peer had not read in shared memory, unsent); not for
 * ever, as a stopped peer cannot answer.  _exit and a crash do not wait. */
static void sw_atexit(void)
{
	for (int i = 0; i < SW_EXIT_MS && atomic_load(&sw_inflight) > 0; i++)
		usleep(1000);
	/* our rendezvous socket's name goes with us (every process with an
	 * accelerated connection has one: prefork servers would fill the
	 * run directory); a killed process leaves it, as a stale name that
	 * the next process with the pid replaces */
	char path[128];
	if (G.rdv && getpid() == my_pid && sc__rendezvous_path(my_pid, path, sizeof(path)) == 0)
		unlink(path);
}

static void sw_atexit_once(void)
{
	atexit(sw_atexit);
}

/* Wake the switch thread (started on first use). */
static void sw_kick(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, sw_atexit_once);
	pthread_mutex_lock(&SW.lock);
	if (!SW.running) {
		if (SW.efd < 0)
			SW.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		pthread_t t;
		pthread_attr_t a;
		sigset_t all, old;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		/* born with every signal blocked: none is delivered to it */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (SW.efd >= 0 && pthread_create(&t, &a, sw_main, NULL) == 0) {
			SW.running = true;
			atomic_store(&SW.started, true);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&a);
	}
	uint64_t one = 1;
	if (SW.efd >= 0 && R(write)(SW.efd, &one, sizeof(one)) < 0)
		one = 0;        /* a saturated counter is readable anyway */
	pthread_mutex_unlock(&SW.lock);
}

/* The peer froze c: switch our half too (the switch thread does it). */
static void sw_ask(struct sc_conn *c)
{
	int expected = SC_SW_NONE;
	if (atomic_compare_exchange_strong(&c->sw, &expected, SC_SW_ASKED))
		sw_kick();
}

/* ---- fork: sharing a connection with a child -----------------------------
 *
 * A connection on shared memory is its owner's (the process that set it
 * up: its cursors live there).  A process that inherited it across fork
 * and uses it (or execs with it) asks the owner to switch it back to TCP,
 * through the owner's control thread, and waits for the switch; from then
 * on both share the kernel socket as they would any.  The owner closing
 * its fd while a child forked since is alive switches it too: the child
 * may go on with it, and the kernel sends no FIN while it does.
 */

/* Children we forked (the last few), for kid_may_hold. */
static struct {
	pthread_mutex_t lock;
	int n;
	pid_t pid[64];
	uint32_t gen[64];
} KIDS = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool kid_alive(pid_t pid)
{
	siginfo_t si = { 0 };
	/* not reaped, not exited (WNOWAIT leaves it for the program) */
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0;
}

static void kid_add(pid_t pid)
{
	uint32_t gen = atomic_fetch_add(&nforks, 1) + 1;
	pthread_mutex_lock(&KIDS.lock);
	int k = 0;
	for (int i = 0; i < KIDS.n; i++)        /* forget those gone */
		if (kid_alive(KIDS.pid[i])) {
			KIDS.pid[k] = KIDS.pid[i];
			KIDS.gen[k++] = KIDS.gen[i];
		}
	KIDS.n = k;
	if (KIDS.n == 64) {                     /* the oldest goes */
		memmove(KIDS.pid, KIDS.pid + 1, 63 * sizeof(KIDS.pid[0]));
		memmove(KIDS.gen, KIDS.gen + 1, 63 * sizeof(KIDS.gen[0]));
		KIDS.n--;
	}
	KIDS.pid[KIDS.n] = pid;
	KIDS.gen[KIDS.n++] = gen;
	pthread_mutex_unlock(&KIDS.lock);
}

/* May a child forked after fork number gen still hold our fds? */
static bool kid_may_hold(uint32_t gen)
{
	if (atomic_load(&nforks) == gen)
		return false;
	bool any = false;
	pthread_mutex_lock(&KIDS.lock);
	for (int i = 0; i < KIDS.n && !any; i++)
		any = KIDS.gen[i] > gen && kid_alive(KIDS.pid[i]);
	pthread_mutex_unlock(&KIDS.lock);
	return any;
}

/* s is an inherited connection on shared memory (another process owns
 * it): have the owner switch it to TCP, then use the kernel socket. */
/* Is the owner of an inherited connection gone?  (A parent that exited may
 * linger as a zombie: then we were re-parented.) */
static bool owner_gone(pid_t owner, pid_t parent_at_fork)
{
	return (kill(owner, 0) < 0 && errno == ESRCH) ||
	       (owner == parent_at_fork && getppid() != owner);
}

/* The owner died (having forked: the peer takes that as a switch): its
 * half is final in shared memory, so we, holding its kernel socket, do
 * what it would have: once the peer froze, re-send what the peer never
 * read of the owner's bytes.  One inheritor does it (FROZEN taken as the
 * claim); the others wait for its ONTCP. */
static int owner_takeover(int fd, struct sc_conn *c)
{
	uint32_t old = atomic_fetch_or(&c->me->flags, SC_SF_FROZEN);
	uint64_t dl = now_ns() + SW_WAIT_NS;
	unsigned us = 20;
	if (old & SC_SF_FROZEN) {
		while (!(atomic_load_explicit(&c->me->flags, memory_order_acquire) & SC_SF_ONTCP)) {
			if (now_ns() > dl)
				return -ENOTCONN;
			usleep(us);
			if (us < 2000)
				us *= 2;
		}
		return 0;
	}
	uint32_t pf;
	while (!((pf = atomic_load_explicit(&c->peer->flags, memory_order_acquire)) &
		 (SC_SF_FROZEN | SC_SF_CLOSED | SC_SF_ABORT | SC_SF_RELEASED)) && now_ns() < dl) {
		usleep(us);
		if (us < 2000)
			us *= 2;
	}
	if (pf & SC_SF_FROZEN) {
		uint64_t pc = atomic_load_explicit(&c->s->consumed[!c->side].rx_consumed,
						   memory_order_relaxed);
		/* what the owner held back (MSG_MORE, cork) is its too */
		sc__ring_take_held(&c->tx);
		uint64_t prod = atomic_load_explicit(&c->tx.h->prod, memory_order_acquire);
		if (prod - pc <= c->tx.size)
			sw_resend(fd, c, pc, prod, -1);
	}
	/* the owner had shut down writing (not closed: it died): its FIN,
	 * held back until the switch */
	uint32_t mf = atomic_load_explicit(&c->me->flags, memory_order_acquire);
	if ((mf & SC_SF_WR_DONE) && !(mf & SC_SF_CLOSED))
		R(shutdown)(fd, SHUT_WR);
	sc__conn_set_flags(c, SC_SF_ONTCP);
	SC_STAT_ADD(fallback[SC_FB_SWITCHED], 1);       /* the owner's half, done here */
	LOG(1, "an inherited connection: its owner died; switched back to TCP for it");
	return 0;
}

static int sw_request_owner_(int fd, struct sc_sock *s, uint32_t why, uint64_t wait_ns)
{
	int saved = errno;
	struct sc_conn *c = s->c;
	int rc = 0;
	if (atomic_load(&s->mode) != M_SHM || s->owner == getpid() || !c) {
		errno = saved;
		return 0;
	}
	/* no lock held while waiting: in a child of vfork, s is the parent's
	 * own, and its switch thread takes s->lock to do what we ask */
	uint32_t f = atomic_load_explicit(&c->me->flags, memory_order_acquire);
	/* the slot holds another connection now: ours was let go of, which
	 * its owner does while a child may hold it only once switched */
	if (c->tag && atomic_load_explicit(&c->me->tag, memory_order_relaxed) != c->tag)
		f = SC_SF_ONTCP;
	if (!(f & SC_SF_ONTCP)) {
		atomic_fetch_or(&c->me->sw_req, why);
		rc = sc__kick_owner(s->owner);
		if (rc < 0 && owner_gone(s->owner, s->parent))
			rc = 0;         /* gone: taken over below */
		uint64_t dl = now_ns() + wait_ns;
		unsigned us = 20;
		while (rc == 0) {
			f = atomic_load_explicit(&c->me->flags, memory_order_acquire);
			if (f & SC_SF_ONTCP)
				break;
			if (owner_gone(s->owner, s->parent)) {
				rc = (f & SC_SF_FORKED) && !(f & (SC_SF_RELEASED | SC_SF_CLOSED)) ?
				     owner_takeover(fd, c) : -ENOTCONN;
				break;
			}
			if ((f & SC_SF_RELEASED) || now_ns() > dl)
				rc = -ENOTCONN;
			else
				usleep(us);
			if (us < 2000)
				us *= 2;
		}
	}
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		atomic_store_explicit(&s->mode, M_TCP, memory_order_release);
		s->counted = true;
		pthread_mutex_unlock(&s->lock);
	} else {
		LOG(1, "an inherited connection: its owner (pid %d) did not switch it to TCP",
		    (int)s->owner);
	}
	errno = saved;
	return rc;
}

/* Control thread, group lock held: a SWITCH arrived for c. */
static void sw_hook(struct sc_conn *c)
{
	(void)c;
	sw_kick();
}

/* A socket still being set up when its fd goes to code without the
 * library: decide now (an accepted one is claimed or declined; a client's
 * offer is withdrawn unless already claimed, its buffered bytes sent), so
 * that the peer neither waits for a claim nor loses bytes. */
static void settle_now(int fd, struct sc_sock *s)
{
	if (atomic_load(&s->mode) == M_SPENDING)
		server_settle(fd, s);
	if (atomic_load(&s->mode) == M_PENDING && s->owner == my_pid) {
		pthread_mutex_lock(&s->lock);
		if (atomic_load(&s->mode) == M_PENDING) {
			s->deadline_ns = 0;     /* withdraw now, unless claimed */
			pending_settle(fd, s, true, -1);
		}
		pthread_mutex_unlock(&s->lock);
	}
}

/* An fd going to code without the library: switch it first. */
/* A listener of ours that can no longer deliver shared memory (its fd
 * passed to another process, io_uring set up): its board entry goes at
 * once, so that no client waits for an answer that will not come; its
 * connections are plain TCP from now on. */
static void listener_withdraw(struct sc_sock *s)
{
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->mode) == M_LISTEN && s->board && s->owner == my_pid) {
		sc__board_unlisten(s->board, s->ino);
		atomic_store(&s->mode, M_TCP);
		LOG(2, "listener withdrawn from the board");
	}
	pthread_mutex_unlock(&s->lock);
}

static void sw_fd(int fd)
{
	struct sc_sock *s = sock_get(fd);
	if (s && atomic_load(&s->mode) == M_LISTEN)
		listener_withdraw(s);   /* the receiver accepts past us */
	if (s && (atomic_load(&s->mode) == M_SPENDING || atomic_load(&s->mode) == M_PENDING))
		settle_now(fd, s);
	if (s && atomic_load(&s->mode) == M_SHM)
		s->owner == my_pid ? (void)sock_switch(fd, s) : (void)sw_request_owner(fd, s);
	tcp_gate(s);            /* the receiver writes after our re-send */
}

/* The accelerated fds in an SCM_RIGHTS message. */
static void sw_rights(const struct msghdr *m)
{
	if (!m || !m->msg_controllen || !m->msg_control)
		return;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR((struct msghdr *)m, cm)) {
		/* a malformed header is the kernel's to refuse (EINVAL) */
		size_t room = m->msg_controllen - (size_t)((char *)cm - (char *)m->msg_control);
		if (cm->cmsg_len < CMSG_LEN(0) || cm->cmsg_len > room)
			break;
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < nfd; i++) {
				int pfd;
				memcpy(&pfd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				sw_fd(pfd);
			}
		}
	}
}

/* ---- exec ------------------------------------------------------------------
 *
 * The new image cannot use our connections' state (even with the library:
 * its table starts empty), so every accelerated fd that survives the exec
 * (no FD_CLOEXEC) goes back to TCP first.  Only in the process that owns
 * them: a child of fork or vfork (whose pid we did not note) leaves its
 * parent's connections alone (README Limits).
 */

/* Every accelerated-or-pending socket of the table with its fd (the exec
 * path: the calling thread is about to replace the image). */
static void fds_each(void (*fn)(int fd, struct sc_sock *s, bool vforked), bool vforked)
{
	for (int p = 0; p < NPAGES; p++) {
		struct sc_sock *_Atomic *pg = atomic_load(&pages[p]);
		for (int i = 0; pg && i < (1 << PAGE_BITS); i++) {
			struct sc_sock *s = atomic_load(&pg[i]);
			if (s)
				fn((p << PAGE_BITS) | i, s, vforked);
		}
	}
}

static bool survives_exec(int fd)
{
	return !(R(fcntl)(fd, F_GETFD) & FD_CLOEXEC);
}

/* sockets still being set up that survive the exec: decided now */
static void exec_settle(int fd, struct sc_sock *s, bool vforked)
{
	int mode = atomic_load(&s->mode);
	if ((mode == M_SPENDING || mode == M_PENDING) && survives_exec(fd))
		settle_now(fd, s);
}

/* re-sends under way in threads that the exec ends: finish first */
static void exec_gate(int fd, struct sc_sock *s, bool vforked)
{
	if (s->c && atomic_load(&s->resending))
		tcp_gate(s);
}

/* the exec closes our FD_CLOEXEC connections without our close(): their
 * records go now (the stats file outlives the image) */
static void exec_records(int fd, struct sc_sock *s, bool vforked)
{
	if (s->rec && !survives_exec(fd)) {
		sc__rec_put(s->rec);
		s->rec = NULL;
	}
}

/* inherited across fork (or, in a child of vfork, all of them: they are
 * our parent's): their owner switches them when asked; not for ever, as
 * the new image may never use them (and a stopped peer cannot answer) */
static void exec_inherited(int fd, struct sc_sock *s, bool vforked)
{
	if (atomic_load(&s->mode) == M_SHM && (vforked || s->owner != my_pid) &&
	    survives_exec(fd))
		sw_request_owner_(fd, s, SC_SWREQ_USE, 2000000000ull);
}

/* Before an exec (spawn false) or a spawn of a child that execs (spawn
 * true: posix_spawn, system, popen; we go on, with our FD_CLOEXEC
 * connections still ours). */
static void exec_prepare_(bool spawn)
{
	int saved = errno;
	bool vforked = my_pid != getpid();
	if (!vforked) {
		fds_each(exec_settle, false);
		sw_scan(true, false, true);     /* ours */
		fds_each(exec_gate, false);
		if (!spawn)
			fds_each(exec_records, false);
	}
	fds_each(exec_inherited, vforked);
	errno = saved;
}

static void exec_prepare(void)
{
	exec_prepare_(false);
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	exec_prepare();
	return R(execve)(path, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
	exec_prepare();
	return R(execv)(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[])
{
	exec_prepare();
	return R(execvp)(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	exec_prepare();
	return R(execvpe)(file, argv, envp);
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	exec_prepare();
	return R(fexecve)(fd, argv, envp);
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		    int flags)
{
	exec_prepare();
	if (!real_execveat) {
		errno = ENOSYS;
		return -1;
	}
	return real_execveat(dirfd, path, argv, envp, flags);
}

/* posix_spawn: glibc's child execs without our execve, so the fds it
 * inherits switch here, as for an exec (file actions may close some: they
 * switch all the same) */
EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	exec_prepare_(true);
	return R(posix_spawn)(pid, path, fa, attr, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	exec_prepare_(true);
	return R(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

/* system() and popen(): glibc spawns the shell from inside them (its own
 * posix_spawn, not the symbol above), and the shell inherits every fd
 * without FD_CLOEXEC: those switch first, as for posix_spawn. */
EXPORT int system(const char *cmd)
{
	if (cmd)
		exec_prepare_(true);
	return R(system)(cmd);
}

EXPORT FILE *popen(const char *cmd, const char *type)
{
	exec_prepare_(true);
	return R(popen)(cmd, type);
}

/* ---- io_uring ----------------------------------------------------------------
 *
 * A ring reads and writes sockets in the kernel, past our table: once the
 * program sets one up (through liburing, whose entry points we wrap), every
 * accelerated connection switches back to TCP and no new one is made
 * (fallback unsupported_option).  So is io_uring_setup through libc's
 * syscall() (below); a program making the system call with its own
 * instruction (static liburing builds, Go) is not seen (README Limits).
 */

struct io_uring;
struct io_uring_params;

static void uring_listener(int fd, struct sc_sock *s, bool vforked)
{
	if (atomic_load(&s->mode) == M_LISTEN)
		listener_withdraw(s);
}

static void uring_seen(void)
{
	int saved = errno;
	if (!G.uring) {
		G.uring = true;
		LOG(1, "io_uring in use: connections go back to TCP, new ones stay there");
	}
	/* its accepts may go past us: no client may wait for our answer */
	fds_each(uring_listener, false);
	sw_scan(true, true, true);
	errno = saved;
}

EXPORT int io_uring_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
	static int (*real)(unsigned, struct io_uring *, unsigned);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring *, unsigned))
			dlsym(RTLD_NEXT, "io_uring_queue_init");
	return real ? real(entries, ring, flags) : -ENOSYS;
}

EXPORT int io_uring_queue_init_params(unsigned entries, struct io_uring *ring,
				      struct io_uring_params *p)
{
	static int (*real)(unsigned, struct io_uring *, struct io_uring_params *);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring *, struct io_uring_params *))
			dlsym(RTLD_NEXT, "io_uring_queue_init_params");
	return real ? real(entries, ring, p) : -ENOSYS;
}

EXPORT int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	static int (*real)(unsigned, struct io_uring_params *);
	uring_seen();
	if (!real)
		real = (int (*)(unsigned, struct io_uring_params *))dlsym(RTLD_NEXT, "io_uring_setup");
	return real ? real(entries, p) : -ENOSYS;
}

/* syscall(): io_uring_setup made through it (the io-uring crate of Rust,
 * programs without liburing) is seen as liburing's is; so are execve and
 * close.  Every other call goes straight to the kernel.  The library's own
 * system calls never come here (rawsys.h).  (Like libc's, it takes six
 * arguments whatever the call: the ones not passed are read from the
 * caller's registers and stack, unused, which a sanitizer would take for
 * an overflow.) */
__attribute__((no_sanitize_address))
EXPORT long syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_io_uring_setup) {
		uring_seen();
	} else if (SC_RAW_SYSCALL_IS_RAW && (nr == SYS_execve || nr == SYS_execveat)) {
		exec_prepare();         /* an exec all the same */
	} else if (SC_RAW_SYSCALL_IS_RAW && nr == SYS_close && a >= 0 && a <= INT_MAX) {
		if (sock_get((int)a))   /* as close() */
			fd_forget_((int)a, true);
		ep_close((int)a);
	}
	return sc_raw_syscall6(nr, a, b, c, d, e, f);
}

/* execl, execlp, execle: arg and the list after it (up to its NULL, which
 * *ap is left past) as an argv of n + 1 entries; n from execl_count. */
static size_t execl_count(va_list ap)
{
	va_list c;
	size_t n = 1;
	va_copy(c, ap);
	while (va_arg(c, char *))
		n++;
	va_end(c);
	return n;
}

static void execl_fill(char **argv, const char *arg, size_t n, va_list *ap)
{
	argv[0] = (char *)arg;
	for (size_t i = 1; i < n; i++)
		argv[i] = va_arg(*ap, char *);
	argv[n] = NULL;
	(void)va_arg(*ap, char *);      /* the NULL */
}

EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	va_end(ap);
	return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	va_end(ap);
	return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	char **envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, argv, envp);
}

/* ---- shutdown / close / dup --------------------------------------------- */

/* 0, or -1 with ENOTCONN when the kernel socket is closed (a reset came):
 * shutdown's answer then. */
static int kernel_sock_closed(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);
	if (R(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 && ti.tcpi_state == TCP_CLOSE) {
		errno = ENOTCONN;
		return -1;
	}
	return 0;
}

/* The peer shut down writing or closed (its FIN, on TCP). */
static bool peer_done_writing(struct sc_conn *c)
{
	return atomic_load_explicit(&c->peer->flags, memory_order_acquire) &
	       (SC_SF_WR_DONE | SC_SF_CLOSED | SC_SF_ABORT);
}

EXPORT int shutdown(int fd, int how)
{
	struct sc_sock *s = sock_get(fd);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return R(shutdown)(fd, how);    /* the kernel's EINVAL (or EBADF...) */
	if (s && atomic_load(&s->mode) == M_SPENDING)
		server_settle(fd, s);
	if (s && atomic_load(&s->mode) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		pending_settle(fd, s, true, -1);
		pthread_mutex_unlock(&s->lock);
	}
	if (s && atomic_load(&s->mode) == M_SHM && s->owner != my_pid)
		sw_request_owner(fd, s);        /* inherited: the FIN goes on TCP */
	if (s && atomic_load(&s->mode) == M_SHM && s->owner == my_pid && switching(s->c))
		sock_switch(fd, s);             /* the re-send goes before our FIN */
	if (s && atomic_load(&s->mode) == M_SHM && s->owner == my_pid) {
		/* (under the lock: a switch to TCP re-sends before our FIN) */
		pthread_mutex_lock(&s->lock);
		if (atomic_load(&s->mode) == M_SHM) {
			/* Our FIN waits on the kernel socket until the
			 * connection goes back to TCP (or the socket closes):
			 * what the peer has not read yet is re-sent ahead of
			 * it then.  The answer is the kernel's: ENOTCONN on a
			 * closed socket, and once both sides are done (the
			 * FINs would have been exchanged). */
			int krc = how == SHUT_WR ? kernel_sock_closed(fd) : R(shutdown)(fd, SHUT_RD);
			if (krc == 0 && s->shut_wr && peer_done_writing(s->c)) {
				errno = ENOTCONN;
				krc = -1;
			}
			int rc = krc < 0 ? 0 : sc_shutdown(s->c, how);
			if (krc == 0 && rc == 0 && how != SHUT_RD)
				s->shut_wr = true;
			pthread_mutex_unlock(&s->lock);
			if (rc < 0) {
				errno = -rc;
				return -1;
			}
			return krc;
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (how != SHUT_RD)
		tcp_gate(s);            /* the re-send before our FIN */
	return R(shutdown)(fd, how);
}


EXPORT int close(int fd)
{
	if (sock_get(fd))
		fd_forget_(fd, true);
	ep_close(fd);
	return R(close)(fd);
}

/* close_range / closefrom: what close() does for each accelerated fd and
 * epoll set in the range (the peer sees the close; the table forgets the
 * numbers), then the kernel's close of the range, less our own fds of the
 * switch (re-sends under way: hidden). */
static void ep_close_range(unsigned first, unsigned last);
static void forget_range(unsigned first, unsigned last)
{
	for (unsigned p = first >> PAGE_BITS; p < NPAGES && (p << PAGE_BITS) <= last; p++) {
		struct sc_sock *_Atomic *pg = atomic_load(&pages[p]);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			unsigned fd = (p << PAGE_BITS) | i;
			if (fd >= first && fd <= last && atomic_load(&pg[i]))
				fd_forget_((int)fd, true);
		}
	}
	ep_close_range(first, last);
}

static int close_range_holes(unsigned first, unsigned last, int flags)
{
	int hs[64], n = 0;
	pthread_mutex_lock(&hidden_lock);
	for (int i = 0; i < nhidden; i++)
		if ((unsigned)hidden[i] >= first && (unsigned)hidden[i] <= last)
			hs[n++] = hidden[i];
	pthread_mutex_unlock(&hidden_lock);
	for (int i = 1; i < n; i++)             /* a few: insertion sort */
		for (int j = i; j > 0 && hs[j - 1] > hs[j]; j--) {
			int t = hs[j];
			hs[j] = hs[j - 1];
			hs[j - 1] = t;
		}
	int rc = 0;
	unsigned lo = first;
	for (int i = 0; i < n; i++) {
		if ((unsigned)hs[i] > lo && R(close_range)(lo, (unsigned)hs[i] - 1, flags) < 0)
			rc = -1;
		lo = (unsigned)hs[i] + 1;
	}
	if ((n == 0 || hs[n - 1] != (int)last) && lo <= last && R(close_range)(lo, last, flags) < 0)
		rc = -1;
	return rc;
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	if (!R(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	/* the kernel's alone: a bad call (its EINVAL), only marking the fds,
	 * a private copy of the fd table, or a vfork child's own fds */
	if (first > last || (flags & ~(CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) ||
	    (flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || in_vfork_child())
		return R(close_range)(first, last, flags);
	forget_range(first, last);
	return close_range_holes(first, last, flags);
}

EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (in_vfork_child()) {
		if (R(closefrom))
			R(closefrom)(lowfd);
		return;
	}
	forget_range((unsigned)lowfd, ~0u);
	if (!R(close_range) || close_range_holes((unsigned)lowfd, ~0u, 0) < 0) {
		if (R(closefrom))
			R(closefrom)(lowfd);
	}
}

EXPORT int dup(int fd)
{
	int n = R(dup)(fd);
	if (n >= 0) {
		fd_alias(fd, n);
		ep_dup(fd, n);
	}
	return n;
}

EXPORT int dup3(int fd, int nfd, int flags)
{
	if (fd == nfd)
		return R(dup3)(fd, nfd, flags);
	int n = R(dup3)(fd, nfd, flags);
	if (n >= 0) {
		fd_forget(nfd);
		ep_close(nfd);
		fd_alias(fd, nfd);
		ep_dup(fd, nfd);
	}
	return n;
}

EXPORT int dup2(int fd, int nfd)
{
	int n = R(dup2)(fd, nfd);
	if (n >= 0 && fd != nfd) {
		fd_forget(nfd);
		ep_close(nfd);
		fd_alias(fd, nfd);
		ep_dup(fd, nfd);
	}
	return n;
}

static int do_fcntl(int (*f)(int, int, ...), int fd, int cmd, va_list ap)
{
	struct sc_sock *s = sock_get(fd);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		int arg = va_arg(ap, int);
		int n = f(fd, cmd, arg);
		if (n >= 0 && s)
			fd_alias(fd, n);
		if (n >= 0)
			ep_dup(fd, n);
		return n;
	}
	case F_SETFL: {
		int arg = va_arg(ap, int);
		int n = f(fd, cmd, arg);
		if (n == 0 && s)
			s->nonblock = arg & O_NONBLOCK;
		return n;
	}
	case F_GETFD: case F_GETFL: case F_GETOWN: case F_GETSIG: case F_GETLEASE:
	case F_GETPIPE_SZ: case F_GET_SEALS:
		return f(fd, cmd);
	default: {
		void *arg = va_arg(ap, void *);
		return f(fd, cmd, arg);
	}
	}
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = do_fcntl(R(fcntl), fd, cmd, ap);
	va_end(ap);
	return rc;
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	int rc = do_fcntl((pthread_once(&real_once, real_init), real_fcntl64), fd, cmd, ap);
	va_end(ap);
	return rc;
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct sc_sock *s = sock_get(fd);
	if (!s)
		return R(ioctl)(fd, req, arg);
	if (req == FIONBIO) {
		int rc = R(ioctl)(fd, req, arg);
		if (rc == 0)
			s->nonblock = *(int *)arg != 0;
		return rc;
	}
	if (atomic_load(&s->mode) == M_SPENDING && (req == FIONREAD || req == SIOCOUTQ))
		server_settle(fd, s);
	if (atomic_load(&s->mode) == M_PENDING && (req == FIONREAD || req == SIOCOUTQ)) {
		pthread_mutex_lock(&s->lock);
		if (req == SIOCOUTQ && atomic_load(&s->mode) == M_PENDING) {
			*(int *)arg = (int)s->plen;
			pthread_mutex_unlock(&s->lock);
			return 0;
		}
		pending_settle(fd, s, false, 0);
		pthread_mutex_unlock(&s->lock);
		if (atomic_load(&s->mode) == M_PENDING) {
			*(int *)arg = 0;
			return 0;
		}
	}
	if (atomic_load(&s->mode) == M_SHM && s->owner != my_pid &&
	    (req == FIONREAD || req == SIOCOUTQ || req == SIOCATMARK))
		sw_request_owner(fd, s);        /* inherited: then the kernel's */
	if (req == SIOCATMARK && atomic_load(&s->mode) == M_SHM && s->owner == my_pid &&
	    switching(s->c))
		sock_switch(fd, s);     /* urgent data on its way: the kernel's */
	if (atomic_load(&s->mode) == M_SHM && s->owner == my_pid &&
	    (req == FIONREAD || req == SIOCOUTQ)) {
		struct sc_conn *c = s->c;
		int64_t v;
		if (req == FIONREAD) {
			v = rx_avail(c);
		} else {
			sc__lock(&c->txlock);
			v = (int64_t)(c->tx.prod -
				      atomic_load_explicit(&c->tx.h->cons, memory_order_acquire));
			sc__unlock(&c->txlock);
			if (v > (int64_t)c->tx.size)
				v = 0;
		}
		*(int *)arg = v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int)v;
		return 0;
	}
	return R(ioctl)(fd, req, arg);
}

EXPORT int getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
	struct sc_sock *s = sock_get(fd);
	if (s && level == SOL_SOCKET && opt == SO_ERROR && atomic_load(&s->mode) == M_SHM &&
	    s->owner == my_pid && val && len && *len >= sizeof(int)) {
		struct sc_conn_info ci;
		sc_conn_info(s->c, &ci);
		if ((ci.state & SC_EV_ERR) || s->sent_to_closed) {
			/* reported once, as the kernel clears sk_err (a reset
			 * in CLOSE_WAIT, after our send to a closed peer, is
			 * EPIPE there) */
			*(int *)val = s->err_reported ? 0 : s->sent_to_closed ? EPIPE : ECONNRESET;
			s->err_reported = true;
			*len = sizeof(int);
			return 0;
		}
	}
	return R(getsockopt)(fd, level, opt, val, len);
}

EXPORT int setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
	struct sc_sock *s = sock_get(fd);
	int rc = R(setsockopt)(fd, level, opt, val, len);
	if (rc == 0 && s && level == SOL_SOCKET && val && len >= sizeof(struct timeval) &&
	    (opt == SO_RCVTIMEO_OLD || opt == SO_SNDTIMEO_OLD || opt == SO_RCVTIMEO_NEW ||
	     opt == SO_SNDTIMEO_NEW)) {
		const struct timeval *tv = val;
		uint64_t ns = (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
		if (opt == SO_RCVTIMEO_OLD || opt == SO_RCVTIMEO_NEW)
			s->rcvtimeo_ns = ns;
		else
			s->sndtimeo_ns = ns;
	}
	if (rc == 0 && s && level == SOL_SOCKET && opt == SO_RCVLOWAT) {
		/* the value the kernel settled on (it clamps) */
		int v = 1;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, SOL_SOCKET, SO_RCVLOWAT, &v, &vl) == 0)
			s->rcvlowat = v;
	}
	if (rc == 0 && s && level == SOL_SOCKET &&
	    (opt == SO_SNDBUF || opt == SO_RCVBUF || opt == SO_SNDBUFFORCE || opt == SO_RCVBUFFORCE)) {
		/* the size the kernel settled on (it doubles and clamps);
		 * the ring's window follows (sc_set_bufs) */
		bool snd = opt == SO_SNDBUF || opt == SO_SNDBUFFORCE;
		int v = 0;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &v, &vl) == 0) {
			*(snd ? &s->sndbuf : &s->rcvbuf) = v / 2 > 0 ? v / 2 : 1;
			if (atomic_load(&s->mode) == M_SHM && s->owner == my_pid && s->c)
				sc_set_bufs(s->c, snd ? s->sndbuf : -1, snd ? -1 : s->rcvbuf);
		}
	}
	if (rc == 0 && s && level == IPPROTO_TCP && (opt == TCP_CORK || opt == TCP_NODELAY) &&
	    val && len >= sizeof(int)) {
		/* cork holds the peer's wake-up back (at most 200 ms, as the
		 * kernel holds the bytes); uncorking, and TCP_NODELAY set,
		 * push what is held (the kernel's tcp_push_pending_frames) */
		bool on = *(const int *)val != 0;
		if (opt == TCP_CORK)
			s->cork = on;
		if (atomic_load(&s->mode) == M_SHM && s->owner == my_pid && s->c) {
			if (opt == TCP_CORK)
				sc_set_cork(s->c, on);
			else if (on)
				sc_flush(s->c);
		}
	}
	if (rc == 0 && s && level == IPPROTO_TCP &&
	    (opt == TCP_FASTOPEN_CONNECT || opt == TCP_REPAIR) && val && len >= sizeof(int))
		s->fastopen = *(const int *)val != 0;
	if (rc == 0 && s && ((level == IPPROTO_IP && opt == IP_TOS) ||
			     (level == IPPROTO_IPV6 && opt == IPV6_TCLASS)) && val && len >= 1) {
		/* as the kernel settled on it (put back after our SYN mark) */
		int v = 0;
		socklen_t vl = sizeof(v);
		if (R(getsockopt)(fd, level, opt, &v, &vl) == 0)
			*(level == IPPROTO_IP ? &s->tos : &s->tclass) = v;
	}
	if (rc == 0 && s && level == SOL_SOCKET && opt == SO_LINGER && val &&
	    len >= sizeof(struct linger)) {
		const struct linger *l = val;
		s->linger0 = l->l_onoff && !l->l_linger;
	}
	return rc;
}

/* ---- readiness: poll / select -------------------------------------------- */

/* Readiness of an accelerated fd as poll() reports it; 0 if it needs the
 * kernel's word (plain TCP).  *waitfd: what to poll to learn of a change. */
static short sock_revents(int fd, struct sc_sock *s, short want, int *waitfd, bool arm)
{
	*waitfd = -1;
	if (atomic_load(&s->mode) == M_SPENDING)
		server_settle(fd, s);
	if (atomic_load(&s->mode) == M_PENDING) {
		pthread_mutex_lock(&s->lock);
		pending_settle(fd, s, false, 0);
		bool pending = atomic_load(&s->mode) == M_PENDING;
		short r = 0;
		if (pending) {
			r = s->plen < PBUF_CAP ? (want & POLLOUT) : 0;
			s->efd_exposed = true;  /* the caller polls it */
			*waitfd = s->efd;
		}
		pthread_mutex_unlock(&s->lock);
		if (pending)
			return r;
	}
	if (atomic_load(&s->mode) == M_SHM && s->owner != my_pid)
		sw_request_owner(fd, s);        /* inherited: on TCP it is ours too */
	if (atomic_load(&s->mode) != M_SHM || s->owner != my_pid)
		return -1;
	/* arm first, then look: a change after the look wakes the fd
	 * (sc_conn_fd's flag update is a full barrier).  A caller that will
	 * not sleep leaves the token as it is: while nobody sleeps, the
	 * peer's sends make no wake-up calls. */
	if (arm) {
		sc__chan_rearm_poll(s->c);
		*waitfd = sc__conn_poll_arm_(s->c, want & POLLOUT, true);
	}
	if (atomic_load(&s->c->sw) != SC_SW_NONE ||
	    (atomic_load_explicit(&s->c->peer->flags, memory_order_acquire) & SC_SF_FROZEN) ||
	    ((atomic_load(&s->c->lflags) & SC_LF_DEATH_SWITCH) && !rx_avail(s->c))) {
		/* going back to TCP: the switch's end wakes the waiter, who
		 * then asks the kernel */
		sw_ask(s->c);
		return 0;
	}
	int ev = sc_conn_events(s->c);
	short r = 0;
	if (ev & SC_EV_IN)
		r |= POLLIN | POLLRDNORM;
	if (ev & SC_EV_OUT)
		r |= POLLOUT | POLLWRNORM;
	if (ev & SC_EV_RDHUP)
		r |= POLLRDHUP;
	if (ev & SC_EV_HUP)
		r |= POLLHUP;
	if (ev & SC_EV_ERR)
		r |= POLLERR | POLLRDHUP | POLLHUP;
	/* the reset a send to a closed peer brings back (see do_sendv):
	 * the kernel's socket is then closed, its error EPIPE */
	if (s->sent_to_closed)
		r |= POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLRDHUP | POLLHUP | POLLERR;
	/* the error, once reported (SO_ERROR, a failed call), is gone from
	 * the mask as sk_err is; the hang-up stays */
	if (s->err_reported)
		r &= (short)~POLLERR;
	/* SO_RCVLOWAT: readable from that many bytes on (or at the end) */
	if (s->rcvlowat > 1 && (r & POLLIN) && !(ev & (SC_EV_RDHUP | SC_EV_HUP | SC_EV_ERR)) &&
	    rx_avail(s->c) < lowat_target(s, SIZE_MAX))
		r &= (short)~(POLLIN | POLLRDNORM);
	r &= (short)(want | POLLHUP | POLLERR);
	return r;
}

static int do_poll(struct pollfd *fds, nfds_t n, int timeout_ms, const sigset_t *mask)
{
	bool any = false;
	for (nfds_t i = 0; i < n; i++)
		if (ep_of(fds[i].fd))
			ep_expose_fd(fds[i].fd);        /* a polled epoll set */
	for (nfds_t i = 0; i < n && !any; i++) {
		struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
		any = s && atomic_load(&s->mode) >= M_SPENDING;
	}
	if (!any) {
		if (mask) {
			struct timespec ts = { timeout_ms / 1000, (timeout_ms % 1000) * 1000000L };
			return R(ppoll)(fds, n, timeout_ms < 0 ? NULL : &ts, mask);
		}
		return R(poll)(fds, n, timeout_ms);
	}
	/* k[0..n) mirrors fds; a pending client also has its kernel socket
	 * watched, in k[n..): its peer's decline, or a plain peer speaking
	 * first, shows only there (was: only its attach eventfd, and a
	 * client waiting for a plain server's greeting slept for ever) */
	struct pollfd local[128];
	nfds_t kn = n;
	int pmap_local[64], *pmap = n <= 64 ? pmap_local : malloc(n * sizeof(*pmap));
	struct pollfd *k = n <= 64 ? local : malloc(2 * n * sizeof(*k));
	if (!k || !pmap) {
		if (k != local)
			free(k);
		if (pmap != pmap_local)
			free(pmap);
		errno = ENOMEM;
		return -1;
	}
	uint64_t end = timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000u;
	int ready;
	for (;;) {
		bool again = false, slice = false;
		ready = 0;
		kn = n;
		for (nfds_t i = 0; i < n; i++) {
			struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
			int wfd;
			short r = s ? sock_revents(fds[i].fd, s, fds[i].events, &wfd, true) : -1;
			if (r >= 0 && on_shared_chan(s))
				slice = true;
			k[i] = fds[i];
			fds[i].revents = 0;
			if (r < 0)
				continue;       /* the kernel decides */
			fds[i].revents = r;
			if (r)
				ready++;
			k[i].fd = wfd;
			k[i].events = POLLIN;
			if (atomic_load(&s->mode) == M_PENDING) {
				pmap[kn - n] = (int)i;
				k[kn++] = (struct pollfd){ .fd = fds[i].fd, .events = POLLIN | POLLRDHUP };
			}
		}
		uint64_t now = now_ns();
		int t = ready ? 0 : end == UINT64_MAX ? -1 :
			now >= end ? 0 : (int)((end - now + 999999) / 1000000);
		if (slice && (t < 0 || t > SHARED_SLICE_MS))
			t = SHARED_SLICE_MS;
		int rc;
		if (mask) {
			struct timespec ts = { t / 1000, (t % 1000) * 1000000L };
			rc = R(ppoll)(k, kn, t < 0 ? NULL : &ts, mask);
		} else {
			rc = R(poll)(k, kn, t);
		}
		if (rc < 0) {
			int e = errno;
			if (k != local)
				free(k);
			if (pmap != pmap_local)
				free(pmap);
			errno = e;
			return -1;
		}
		for (nfds_t x = n; x < kn; x++)
			if (k[x].revents)       /* look at the pending client again */
				k[pmap[x - n]].revents |= POLLIN;
		for (nfds_t i = 0; i < n; i++) {
			struct sc_sock *s = fds[i].fd >= 0 ? sock_get(fds[i].fd) : NULL;
			int wfd;
			if (s && k[i].fd != fds[i].fd && atomic_load(&s->mode) < M_SPENDING) {
				/* switched back to TCP meanwhile: the kernel
				 * answers on the next round */
				if (k[i].revents)
					again = true;
			} else if (s && atomic_load(&s->mode) >= M_SPENDING) {
				if (k[i].revents && !fds[i].revents) {
					short r = sock_revents(fds[i].fd, s, fds[i].events, &wfd, true);
					if (r > 0) {
						fds[i].revents = r;
						ready++;
					}
				}
			} else if (k[i].revents) {
				fds[i].revents = k[i].revents;
				ready++;
			}
		}
		if (ready || (t >= 0 && now_ns() >= end && !again))
			break;
	}
	if (k != local)
		free(k);
	if (pmap != pmap_local)
		free(pmap);
	return ready;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	return do_poll(fds, n, timeout, NULL);
}

EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return R(__poll_chk)(fds, n, timeout, fdslen);
	return do_poll(fds, n, timeout, NULL);
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	int t = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	if (!mask)
		return do_poll(fds, n, t, NULL);
	return do_poll(fds, n, t, mask);
}

EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		       const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < n)
		return R(__ppoll_chk)(fds, n, ts, mask, fdslen);
	return ppoll(fds, n, ts, mask);
}

static int do_select(int nfds, fd_set *r, fd_set *w, fd_set *e, int timeout_ms,
		     const sigset_t *mask)
{
	bool any = false;
	for (int fd = 0; fd < nfds; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w))) && ep_of(fd))
			ep_expose_fd(fd);               /* a selected epoll set */
	for (int fd = 0; fd < nfds && !any; fd++) {
		struct sc_sock *s = sock_get(fd);
		any = s && atomic_load(&s->mode) >= M_SPENDING &&
		      ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e)));
	}
	if (!any)
		return -2;
	struct pollfd *p = calloc((size_t)nfds + 1, sizeof(*p));
	int *map = calloc((size_t)nfds + 1, sizeof(int));
	int np = 0;
	if (!p || !map) {
		free(p);
		free(map);
		errno = ENOMEM;
		return -1;
	}
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (!ev)
			continue;
		p[np].fd = fd;
		p[np].events = ev;
		map[np++] = fd;
	}
	int rc = do_poll(p, (nfds_t)np, timeout_ms, mask);
	if (rc >= 0) {
		int count = 0;
		for (int i = 0; i < np; i++)
			if (p[i].revents & POLLNVAL) {
				free(p);
				free(map);
				errno = EBADF;
				return -1;
			}
		if (r) FD_ZERO(r);
		if (w) FD_ZERO(w);
		if (e) FD_ZERO(e);
		for (int i = 0; i < np; i++) {
			short re = p[i].revents;
			if (r && (p[i].events & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
				FD_SET(map[i], r);
				count++;
			}
			if (w && (p[i].events & POLLOUT) && (re & (POLLOUT | POLLERR))) {
				FD_SET(map[i], w);
				count++;
			}
			if (e && (p[i].events & POLLPRI) && (re & POLLPRI)) {
				FD_SET(map[i], e);
				count++;
			}
		}
		rc = count;
	}
	free(p);
	free(map);
	return rc;
}

EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
	int t = tv ? (int)(tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000) : -1;
	uint64_t start = tv ? now_ns() : 0;
	int rc = do_select(nfds, r, w, e, t, NULL);
	if (rc == -2)
		return R(select)(nfds, r, w, e, tv);
	if (tv) {
		/* Linux reports the time left */
		uint64_t used = (now_ns() - start) / 1000;
		uint64_t had = (uint64_t)tv->tv_sec * 1000000 + (uint64_t)tv->tv_usec;
		uint64_t left = used >= had ? 0 : had - used;
		tv->tv_sec = (time_t)(left / 1000000);
		tv->tv_usec = (suseconds_t)(left % 1000000);
	}
	return rc;
}

EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *ts,
		   const sigset_t *mask)
{
	int t = ts ? (int)(ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000) : -1;
	int rc = do_select(nfds, r, w, e, t, mask);
	if (rc == -2)
		return R(pselect)(nfds, r, w, e, ts, mask);
	return rc;
}

/* ---- fork ----------------------------------------------------------------- */

/* Every socket of the table (fork paths: no other thread runs). */
static void socks_each(void (*fn)(struct sc_sock *s, pid_t a, pid_t b), pid_t a, pid_t b)
{
	for (int p = 0; p < NPAGES; p++) {
		struct sc_sock *_Atomic *pg = atomic_load(&pages[p]);
		if (!pg)
			continue;
		for (int i = 0; i < (1 << PAGE_BITS); i++) {
			struct sc_sock *s = atomic_load(&pg[i]);
			if (s)
				fn(s, a, b);
		}
	}
}

/* A listening socket owned by parent is child's too: name it on its board. */
static void listener_inherit(struct sc_sock *s, pid_t parent, pid_t child)
{
	if (child == my_pid) {
		s->parent = parent;
		/* a thread of the parent's (its switch thread) may have held
		 * them at the fork: here nobody does */
		pthread_mutex_init(&s->lock, NULL);
		pthread_mutex_init(&s->wlock, NULL);
		pthread_cond_init(&s->wcond, NULL);
		/* a re-send under way is the parent's: tcp_gate waits for
		 * the owner's ONTCP instead */
	}
	if (atomic_load(&s->mode) == M_LISTEN && s->board && s->owner == parent &&
	    sc__board_listen_inherit(s->board, s->ino, parent, child) == 0 && child == my_pid)
		s->owner = child;
	if (child == my_pid)
		s->rec = NULL;          /* in the child: records stay the parent's */
}

/* A connection of ours on shared memory is the child's too now: if we die
 * first, the peer takes it as a switch to TCP (the child may go on). */
static void mark_forked(struct sc_sock *s, pid_t parent, pid_t child)
{
	(void)child;
	if (atomic_load(&s->mode) == M_SHM && s->owner == parent && s->c &&
	    !(atomic_load_explicit(&s->c->me->flags, memory_order_relaxed) & SC_SF_FORKED))
		sc__conn_set_flags(s->c, SC_SF_FORKED);
}

/* fork: the child holds our listening sockets too.  Name it on their
 * boards before the parent goes on (it may close its copy at once, and a
 * client must still find a live listener); the child does it again. */
EXPORT pid_t fork(void)
{
	pid_t child = R(fork)();
	if (child <= 0)
		return child;
	int saved = errno;
	kid_add(child);
	pthread_mutex_lock(&table_lock);        /* other threads run here */
	socks_each(mark_forked, my_pid, child);
	pthread_mutex_unlock(&table_lock);
	socks_each(listener_inherit, my_pid, child);
	ep_mark_shared();
	errno = saved;
	return child;
}

static void ep_atfork_child(void);

static void atfork_child(void)
{
	pid_t parent = my_pid;

	sc__pid_reset();        /* before anything records our pid */
	my_pid = getpid();
	sc__board_atfork_child();       /* the parent's listener locks stay its own */
	/* listening sockets we inherited: we may accept on them too, so the
	 * board names us as well (the parent may close its copy) */
	socks_each(listener_inherit, parent, my_pid);
	/* The control thread did not come along: the child starts its own
	 * rendezvous and link groups when it needs them.  Connections the
	 * parent accelerated stay the parent's (s->owner); the child's
	 * close() of them only drops its fd. */
	pthread_mutex_init(&G.rdv_lock, NULL);
	pthread_mutex_init(&G.create_lock, NULL);
	pthread_mutex_init(&table_lock, NULL);
	G.rdv = NULL;
	G.pending = NULL;
	sc__link_atfork_child();
	ep_atfork_child();
	hidden_atfork_child();  /* the parent's dups of kernel sockets */
	for (struct sw_orphan *o = sw_orphans, *next; o; o = next) {
		next = o->next;         /* (their fds were hidden ones) */
		free(o);
	}
	sw_orphans = NULL;
	atomic_store(&sw_inflight, 0);
	KIDS.n = 0;             /* those were our siblings */
	pthread_mutex_init(&KIDS.lock, NULL);
	/* the switch thread did not come along either */
	pthread_mutex_init(&SW.lock, NULL);
	if (SW.efd >= 0)
		R(close)(SW.efd);
	if (SW.ino >= 0)
		R(close)(SW.ino);
	SW.efd = SW.ino = -1;
	SW.running = false;
	atomic_store(&SW.started, false);
	/* the child counts in a file of its own */
	if (sc__rundir() && sc__stats_file_open_child() < 0)
		LOG(1, "cannot create a stats file in the run directory");
}

/* ---- readiness: epoll ------------------------------------------------------
 *
 * An epoll set that holds accelerated fds gets an inner epoll set of ours,
 * registered in it under a magic cookie.  The inner set watches, per
 * accelerated fd, what signals a change: the connection's pollable fd (or,
 * for a pending client, its attach eventfd and its kernel socket).  When
 * the cookie fires, epoll_wait asks each signalled registration for its
 * real readiness.  Level-triggered registrations that reported stay on a
 * check list and are asked again at every epoll_wait until they are not
 * ready, so a wait costs O(ready), not O(registered).
 */

/* Cookies: what the kernel's sets know our own registrations by.  An inner
 * set's registration in the program's set, and a nested program set's in
 * its outer set, are made under a value of ours instead of the program's
 * epoll_data, so that they are told from every fd of the program's: 20
 * bits of magic (a non-canonical address, no pointer has it), the pid (a
 * set inherited across fork is shared with the other process, whose
 * cookies we must never report) and an id naming the set.  No cookie ever
 * reaches the program: every wait, ours or the kernel's, drops or
 * translates them. */
#define EP_MAGIC_SET	0x5c0deull
#define EP_MAGIC_KID	0x5c0dfull
#define EP_PID_MASK	0x3fffffu
static uint64_t ep_mkcookie(uint64_t magic, uint32_t id)
{
	return magic << 44 | (uint64_t)((uint32_t)my_pid & EP_PID_MASK) << 22 |
	       (id & EP_PID_MASK);
}

static uint64_t kid_cookie(uint32_t id)
{
	return ep_mkcookie(EP_MAGIC_KID, id);
}

static bool is_kid_cookie(uint64_t v)
{
	return v >> 44 == EP_MAGIC_KID;
}

static bool is_cookie(uint64_t v)
{
	return v >> 44 == EP_MAGIC_SET;
}

/* a cookie of this process's (not of a process that shares the set) */
static bool cookie_mine(uint64_t v)
{
	return (uint32_t)(v >> 22 & EP_PID_MASK) == ((uint32_t)my_pid & EP_PID_MASK);
}

struct sc_epreg {
	int fd;
	struct sc_sock *s;
	uint32_t events;        /* as the program asked */
	epoll_data_t data;
	bool listed;            /* on the check list */
	bool disabled;          /* EPOLLONESHOT fired; re-armed by MOD */
	bool deleted;           /* EPOLL_CTL_DEL'd: dormant until added again */
	bool shared;            /* its connection is bound to the set's channel */
	bool second;            /* ... as one of the connection's extra channels (chanx) */
	bool exclusive;         /* added with EPOLLEXCLUSIVE: no MOD (kernel rule) */
	bool foreign;           /* watched through another set's channel (nforeign) */
	bool force_edge;        /* EPOLLET: ADD or MOD polls it afresh, as the kernel's */
	uint64_t sig_fl;        /* EPOLLET: the flags when last reported (HUP/ERR edges) */
	struct sc_epreg *sib;   /* other entries of this set for the same connection
				 * (dup'd fds): the connection's user is the first */
	int kind;               /* what the inner set watches: 0 none, M_PENDING, M_SHM */
	uint64_t seen;          /* the epoll_wait call that last reported it */
	uint64_t sig_in, sig_out;       /* EPOLLET: state when last reported */
	bool fired;             /* signalled since last armed (on the fired list) */
	struct sc_epreg *fnext;
	int wfd[2];             /* the fds registered in the inner set */
	struct sc_epreg *next, *cnext;
};

/*
 * An epoll set of the program's: one per open file description, as the
 * kernel knows it, whatever fds name it.  The program may copy an epoll fd
 * (dup, dup2, dup3, F_DUPFD: mio registers through a copy and waits
 * through the original), close one copy while another lives, inherit it
 * across fork, or receive a copy with SCM_RIGHTS; every copy is the same
 * set.  The fds we saw made name it in the table (ep_of); one we did not
 * see made (SCM_RIGHTS) is recognised when it is used (ep_adopt).
 *
 * The shadow (inner set, channel, entries) appears when the first
 * accelerated fd is registered (inner >= 0; then the set is on `eps`).
 */
struct sc_ep {
	int fd;                 /* one of its fds, for our own calls on the kernel's set */
	int *fds, nfds, fds_cap;        /* every fd of ours naming it (eps_lock) */
	uint32_t id;            /* in its cookie */
	uint64_t cookie;        /* the inner set's data in the kernel's set */
	int inner;              /* the inner set; -1: no shadow yet */
	bool exposed;           /* in another epoll set, or polled: keep its fd's
				 * readiness true between our epoll_waits */
	bool shared;            /* inherited across fork: shared with another process */
	_Atomic bool child_used;        /* ... and a child of ours waits in it (ep_switched) */
	/* the completion channel of this waiting context: its connections
	 * bound to it wake it through one wake socket per link group, and one
	 * collect reports every one that became ready (O(ready)) */
	struct sc_chan *ch;
	pthread_mutex_t lock;
	struct sc_epreg *regs, *check;
	struct sc_epreg *fired;         /* to re-arm before the next sleep */
	uint64_t calls;         /* epoll_wait calls (an fd is reported once per call) */
	bool held;              /* ep_expose found it ready (counted in nexp_sig) */
	/* threads asleep in the kernel's wait on it, ours or passed through:
	 * a registration made meanwhile must wake them (epoll_ctl) */
	_Atomic int sleepers;
	/* epoll sets of the program's registered in this one (nested): their
	 * events are checked before they are reported (see ep_wait) */
	struct sc_epkid {
		int fd;
		uint64_t cookie;        /* the kernel set knows it by this */
		uint64_t data;          /* the program's epoll_data */
		struct sc_epkid *next;
	} *kids;
	struct sc_ep *next;     /* on `eps` (shadowed sets) */
};

static pthread_mutex_t eps_lock = PTHREAD_MUTEX_INITIALIZER;
/* Paths that use a set found by its fd after dropping eps_lock (the exposed
 * and nested-set ones: a read in one thread may expose a set another
 * thread closes) hold this for reading; ep_close frees a set only with it
 * held for writing. */
static pthread_rwlock_t ep_life = PTHREAD_RWLOCK_INITIALIZER;
static struct sc_ep *eps;       /* the sets with a shadow */
static _Atomic int neps;        /* fast path: no shadow at all */

/* fd -> its epoll set, pages as the socket table's (written under eps_lock) */
static struct sc_ep *_Atomic *_Atomic ep_pages[NPAGES];

static struct sc_ep *ep_of(int fd)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return NULL;
	struct sc_ep *_Atomic *p = atomic_load_explicit(&ep_pages[fd >> PAGE_BITS],
						       memory_order_acquire);
	return p ? atomic_load_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], memory_order_acquire)
		 : NULL;
}

/* eps_lock held */
static bool ep_tab_set(int fd, struct sc_ep *e)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return false;
	struct sc_ep *_Atomic *p = atomic_load(&ep_pages[fd >> PAGE_BITS]);
	if (!p) {
		if (!e)
			return true;
		p = calloc(1u << PAGE_BITS, sizeof(*p));
		if (!p)
			return false;
		atomic_store_explicit(&ep_pages[fd >> PAGE_BITS], p, memory_order_release);
	}
	atomic_store_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], e, memory_order_release);
	return true;
}

/* eps_lock held: fd names e too */
static bool ep_fd_add(struct sc_ep *e, int fd)
{
	if (e->nfds == e->fds_cap) {
		int cap = e->fds_cap ? e->fds_cap * 2 : 4;
		int *p = realloc(e->fds, (size_t)cap * sizeof(*p));
		if (!p)
			return false;
		e->fds = p;
		e->fds_cap = cap;
	}
	if (!ep_tab_set(fd, e))
		return false;
	e->fds[e->nfds++] = fd;
	return true;
}

/* eps_lock held: fd no longer names e; returns how many still do */
static int ep_fd_del(struct sc_ep *e, int fd)
{
	ep_tab_set(fd, NULL);
	for (int i = 0; i < e->nfds; i++)
		if (e->fds[i] == fd) {
			e->fds[i] = e->fds[--e->nfds];
			break;
		}
	if (e->fd == fd && e->nfds)
		e->fd = e->fds[0];
	return e->nfds;
}

/* eps_lock held: a set object for the epoll fd `fd`, no shadow yet */
static struct sc_ep *ep_new(int fd)
{
	struct sc_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->fd = fd;
	e->inner = -1;
	pthread_mutex_init(&e->lock, NULL);
	if (!ep_fd_add(e, fd)) {
		free(e->fds);
		free(e);
		return NULL;
	}
	return e;
}

/* Free a set no fd names, whose shadow is gone (no user left: ep_life) */
static void ep_free(struct sc_ep *e)
{
	pthread_mutex_destroy(&e->lock);
	free(e->fds);
	free(e);
}

/* eps_lock held: fd is an epoll fd we did not see made (received with
 * SCM_RIGHTS, made by a raw system call): the set of ours it is a copy of,
 * or a new one.  A copy of a shadowed set holds that set's inner set: the
 * kernel accepts a MOD of it there and nowhere else. */
static struct sc_ep *ep_copy_locked(int fd, bool *is_epoll)
{
	for (struct sc_ep *e = eps; e; e = e->next) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = e->cookie };
		if (R(epoll_ctl)(fd, EPOLL_CTL_MOD, e->inner, &ev) == 0)
			return ep_fd_add(e, fd) ? e : NULL;
		if (errno == ENOENT && is_epoll)
			*is_epoll = true;       /* an epoll set, not that one */
	}
	return NULL;
}

static struct sc_ep *ep_adopt(int fd)
{
	struct sc_ep *e = ep_copy_locked(fd, NULL);
	return e ? e : ep_new(fd);
}

/* The shadowed set of epfd; with create, made if need be (the fd's set
 * object too, if it is a copy we did not see made).  NULL, errno set, if
 * it cannot be (the kernel's EBADF or EINVAL for an fd that is no epoll
 * set). */
static struct sc_ep *ep_get(int epfd, bool create)
{
	if (!create) {
		if (!atomic_load_explicit(&neps, memory_order_acquire))
			return NULL;
		struct sc_ep *e = ep_of(epfd);
		return e && e->inner >= 0 ? e : NULL;
	}
	static _Atomic uint32_t next_id;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	bool adopted = false;
	if (!e) {
		e = ep_adopt(epfd);
		adopted = e && e->nfds == 1;
	}
	if (e && e->inner < 0) {
		e->inner = R(epoll_create1)(EPOLL_CLOEXEC);
		e->id = atomic_fetch_add(&next_id, 1) + 1;
		e->cookie = ep_mkcookie(EP_MAGIC_SET, e->id);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = e->cookie };
		if (e->inner < 0 || R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, e->inner, &ev) < 0) {
			int err = errno;
			if (e->inner >= 0)
				R(close)(e->inner);
			e->inner = -1;
			if (adopted) {          /* no epoll set: forget it */
				ep_fd_del(e, epfd);
				ep_free(e);
			}
			errno = err;
			e = NULL;
		} else {
			e->next = eps;
			eps = e;
			atomic_fetch_add(&neps, 1);
		}
	}
	pthread_mutex_unlock(&eps_lock);
	return e;
}

/* epfd, which names no set we know, is a copy of one of our shadowed sets
 * (received with SCM_RIGHTS): that set, now named by epfd too; or NULL.
 * With known, an epoll set that is no copy of ours is known from now on
 * (so that it is looked at once). */
static struct sc_ep *ep_copy_of(int epfd, bool known)
{
	bool is_epoll = false;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	if (!e) {
		e = ep_copy_locked(epfd, &is_epoll);
		if (!e && known && is_epoll)
			ep_new(epfd);
	} else if (e->inner < 0) {
		e = NULL;
	}
	pthread_mutex_unlock(&eps_lock);
	return e;
}

/* An epoll fd the program made (epoll_create*): a set of its own.  The
 * number may have named a set closed behind our back: that is gone. */
static void ep_created(int fd)
{
	if (fd < 0)
		return;
	if (ep_of(fd))
		ep_close(fd);
	pthread_mutex_lock(&eps_lock);
	ep_new(fd);
	pthread_mutex_unlock(&eps_lock);
}

/* newfd is a copy of oldfd (dup, dup2, dup3, F_DUPFD): if oldfd names an
 * epoll set, newfd names the same one (the caller closed newfd's old set) */
static void ep_dup(int oldfd, int newfd)
{
	if (!ep_of(oldfd) || in_vfork_child())
		return;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(oldfd);
	if (e && ep_of(newfd) != e)
		ep_fd_add(e, newfd);
	pthread_mutex_unlock(&eps_lock);
}

/* fork (in the parent, and the child): every set is now shared with the
 * other process (the kernel's set is one object): its events may carry the
 * other's cookie, which we must drop (ep_wait, ep_kernel_wait). */
static void ep_mark_shared(void)
{
	for (unsigned p = 0; p < NPAGES; p++) {
		struct sc_ep *_Atomic *pg = atomic_load(&ep_pages[p]);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			struct sc_ep *e = atomic_load_explicit(&pg[i], memory_order_relaxed);
			if (e)
				e->shared = true;
		}
	}
}

/* e->lock held */
/* Entries watching a connection through a channel that is not their set's
 * own (it is in another set too): while there are any, a set does not
 * reset its channel's fd when it wakes (the other set may be asleep on it),
 * and such entries are looked at in every call. */
static _Atomic int nforeign;

static void reg_unwatch(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->foreign) {
		r->foreign = false;
		atomic_fetch_sub(&nforeign, 1);
	}
	for (int i = 0; i < 2; i++)
		if (r->wfd[i] >= 0) {
			R(epoll_ctl)(e->inner, EPOLL_CTL_DEL, r->wfd[i], NULL);
			r->wfd[i] = -1;
		}
	r->kind = 0;
}

static void reg_watch_fd(struct sc_ep *e, struct sc_epreg *r, int i, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = r };
	if (R(epoll_ctl)(e->inner, EPOLL_CTL_ADD, fd, &ev) == 0)
		r->wfd[i] = fd;
}

static void check_add(struct sc_ep *e, struct sc_epreg *r)
{
	if (r->listed || r->disabled || r->deleted)
		return;
	r->listed = true;
	r->cnext = e->check;
	e->check = r;
}

/* e->lock held: unlink r from the lists and free it. */
static void reg_free(struct sc_ep *e, struct sc_epreg *r)
{
	reg_unwatch(e, r);
	if (r->shared && r->second && r->s->c) {
		struct sc_conn *c = r->s->c;
		pthread_mutex_lock(&c->bindlock);
		int x = sc__chan_xindex(c, e->ch);
		if (x >= 0) {
			struct sc_epreg *head = c->userx[x];
			if (head == r)
				c->userx[x] = r->sib;
			else
				for (struct sc_epreg *q = head; q; q = q->sib)
					if (q->sib == r) {
						q->sib = r->sib;
						break;
					}
			/* the last entry: the set stops watching it */
			if (!c->userx[x])
				sc__chan_detachx(e->ch, c, x);
		}
		pthread_mutex_unlock(&c->bindlock);
	} else if (r->shared && r->s->c) {
		struct sc_epreg *head = sc_conn_user(r->s->c);
		if (head == r)
			sc_conn_set_user(r->s->c, r->sib);     /* NULL: collected, ignored */
		else
			for (struct sc_epreg *q = head; q; q = q->sib)
				if (q->sib == r) {
					q->sib = r->sib;
					break;
				}
	}
	for (struct sc_epreg **pp = &e->fired; *pp; pp = &(*pp)->fnext)
		if (*pp == r) {
			*pp = r->fnext;
			break;
		}
	for (struct sc_epreg **pp = &e->check; *pp; pp = &(*pp)->cnext)
		if (*pp == r) {
			*pp = r->cnext;
			break;
		}
	for (struct sc_epreg **pp = &e->regs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	free(r);
}

static uint32_t poll_to_epoll(short r)
{
	uint32_t ev = 0;
	if (r & POLLIN) ev |= EPOLLIN | EPOLLRDNORM;
	if (r & POLLOUT) ev |= EPOLLOUT | EPOLLWRNORM;
	if (r & POLLRDHUP) ev |= EPOLLRDHUP;
	if (r & POLLHUP) ev |= EPOLLHUP;
	if (r & POLLERR) ev |= EPOLLERR;
	if (r & POLLPRI) ev |= EPOLLPRI;
	return ev;
}

/* e->lock held: r's readiness now, keeping what the inner set watches in
 * step with the connection's mode.  Returns 0 and frees r if the fd went
 * back to plain TCP (the kernel set then watches it itself); *gone set. */
static const char ep_chan_mark;        /* inner-set data of the channel's fd */

/* e->lock held: the set's channel, created on first use, in the inner set. */
static int ep_chan_ensure(struct sc_ep *e)
{
	if (e->ch)
		return 0;
	struct sc_chan *ch;
	if (sc_chan_open(&ch) < 0)
		return -ENOMEM;
	int cfd = sc_chan_fd(ch);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = (void *)&ep_chan_mark };
	if (cfd < 0 || R(epoll_ctl)(e->inner, EPOLL_CTL_ADD, cfd, &ev) < 0) {
		sc_chan_close(ch);
		return -ENOMEM;
	}
	e->ch = ch;
	return 0;
}

/* e->lock held: bind c to the set's channel (created on first use). */
static int ep_bind(struct sc_ep *e, struct sc_epreg *r, struct sc_conn *c)
{
	if (ep_chan_ensure(e) < 0)
		return -ENOMEM;
	struct sc_chan *cur = atomic_load(&c->chan);
	if (cur && cur != c->own && cur != e->ch) {
		/* in another epoll set's channel: ours watches it as one of
		 * the connection's extra channels (the peer wakes every one),
		 * if one is free */
		pthread_mutex_lock(&c->bindlock);
		int x = sc__chan_xindex(c, e->ch), rc = 0;
		if (x >= 0) {
			struct sc_epreg *q = c->userx[x];
			while (q && q != r)
				q = q->sib;
			if (!q) {
				r->sib = ((struct sc_epreg *)c->userx[x])->sib;
				((struct sc_epreg *)c->userx[x])->sib = r;
			}
		} else {
			x = sc__chan_xindex(c, NULL);   /* a free one */
			if (x < 0)
				rc = -EBUSY;    /* too many sets: it polls the first's fd */
			else if ((rc = sc__chan_attachx(e->ch, c, x)) == 0) {
				r->sib = NULL;
				c->userx[x] = r;
			}
		}
		pthread_mutex_unlock(&c->bindlock);
		if (rc == 0) {
			r->second = true;
			/* what happened before the watch began is seen by
			 * the caller's look; the next change wakes us */
			atomic_fetch_or(&c->rx.h->rx_armed, SC_ARM_EDGE);
		}
		return rc;
	}
	struct sc_epreg *head = cur == e->ch ? sc_conn_user(c) : NULL;
	if (head) {
		/* another entry of ours has it (a dup'd fd): chain r to it */
		for (struct sc_epreg *q = head; q; q = q->sib)
			if (q == r)
				return 0;
		r->sib = head->sib;
		head->sib = r;
		return 0;
	}
	if (cur != e->ch && sc_chan_bind(c, e->ch) < 0)
		return -ENOMEM;
	r->sib = NULL;
	sc_conn_set_user(c, r);
	return 0;
}

static void fired_add(struct sc_ep *e, struct sc_epreg *r);
static bool ep_arm(struct sc_ep *e, bool sleep);

/* e->lock held: the connections of the set's channel that became ready
 * since the last collect go on the check list; returns how many.  With
 * arm, the channel's cells are armed first (sc_chan_wait with no wait):
 * only a caller about to sleep arms them, so that a waker finding us
 * awake makes no system call. */
static int ep_collect(struct sc_ep *e, bool arm)
{
	struct sc_conn *cs[64];
	int total = 0, k;

	if (!e->ch)
		return 0;
	do {
		k = arm ? sc_chan_wait(e->ch, cs, 64, 0) : sc__chan_collect(e->ch, cs, 64);
		if (k < 0)
			k = 0;
		for (int i = 0; i < k; i++) {
			int x = atomic_load(&cs[i]->chan) == e->ch ? -1 : sc__chan_xindex(cs[i], e->ch);
			struct sc_epreg *head = x >= 0 ? cs[i]->userx[x] : sc_conn_user(cs[i]);
			for (struct sc_epreg *r = head; r; r = r->sib) {
				check_add(e, r);
				fired_add(e, r);
			}
			total++;
		}
	} while (k == 64);
	return total;
}

static uint32_t reg_eval(struct sc_ep *e, struct sc_epreg *r, bool *gone)
{
	struct sc_sock *s = r->s;
	short want = POLLIN | POLLOUT | POLLRDHUP | POLLPRI;
	int wfd;
	*gone = false;
	short rv = sock_revents(r->fd, s, want, &wfd, false);
	int mode = atomic_load(&s->mode);
	if (rv < 0 && mode != M_SHM) {
		/* fell back to TCP: hand the fd to the kernel's own set */
		struct epoll_event ev = { .events = r->events, .data = r->data };
		if (!r->disabled)
			R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, r->fd, &ev);
		reg_free(e, r);
		*gone = true;
		return 0;
	}
	if (rv < 0)
		rv = 0;
	if (r->kind != mode) {
		reg_unwatch(e, r);
		int efd = -1;
		if (mode == M_PENDING) {
			pthread_mutex_lock(&s->lock);
			mode = atomic_load(&s->mode);
			if (mode == M_PENDING) {
				s->efd_exposed = true;  /* the inner set watches it */
				efd = s->efd;
			}
			pthread_mutex_unlock(&s->lock);
			if (mode != M_PENDING)
				check_add(e, r);        /* settled meanwhile: look again */
		}
		r->kind = mode;
		if (mode == M_PENDING) {
			reg_watch_fd(e, r, 0, efd);
			reg_watch_fd(e, r, 1, r->fd);
		} else if (mode == M_SHM && s->owner == my_pid) {
			if (ep_bind(e, r, s->c) == 0) {
				r->shared = true;
				sc__conn_poll_arm(s->c, (r->events & EPOLLOUT) ||
						  (r->second && s->c->polled_out));
			} else {
				/* its own pollable fd, watched by the inner set */
				int pfd = sc__conn_poll_arm(s->c, r->events & EPOLLOUT);
				if (pfd >= 0)
					reg_watch_fd(e, r, 0, pfd);
				r->foreign = true;
				atomic_fetch_add(&nforeign, 1);
			}
			/* anything that happened before the watch began */
			rv = sock_revents(r->fd, s, want, &wfd, false);
			if (rv < 0)
				rv = 0;
		}
	}
	return poll_to_epoll(rv) & (r->events | EPOLLHUP | EPOLLERR);
}

static void fired_add(struct sc_ep *e, struct sc_epreg *r)
{
	if (!r->fired) {
		r->fired = true;
		r->fnext = e->fired;
		e->fired = r;
	}
}

/* A registration was made while threads sleep in the kernel's wait on e:
 * arm the channel (its next event wakes them) and wake them now, to look
 * (a look finding nothing sleeps again). */
static void ep_wake_sleepers(struct sc_ep *e)
{
	ep_arm(e, true);
	pthread_mutex_lock(&e->lock);
	if (ep_chan_ensure(e) == 0)
		sc__chan_signal(e->ch);
	pthread_mutex_unlock(&e->lock);
}

EXPORT int epoll_create(int size)
{
	int fd = R(epoll_create)(size);
	ep_created(fd);
	return fd;
}

EXPORT int epoll_create1(int flags)
{
	int fd = R(epoll_create1)(flags);
	ep_created(fd);
	return fd;
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (atomic_load_explicit(&ep_inh, memory_order_relaxed))
		ep_inherited_use(ep_of(epfd));
	if (ep_of(fd)) {
		/* an epoll set of the program's going into another one: the
		 * outer set gets a shadow that checks it before reporting, and
		 * the kernel's set knows it by a cookie of ours (the program's
		 * data may be another fd's too) */
		struct sc_ep *o = op == EPOLL_CTL_DEL || !ev ? NULL :
				  ep_get(epfd, op == EPOLL_CTL_ADD);
		struct epoll_event kev;
		if (o) {
			pthread_mutex_lock(&o->lock);
			uint64_t had = ep_kid_cookie(o, fd);
			ep_kid_set(o, fd, EPOLL_CTL_ADD, ev->data.u64);
			kev = *ev;
			kev.data.u64 = ep_kid_cookie(o, fd);
			int rc = kev.data.u64 ? R(epoll_ctl)(epfd, op, fd, &kev)
					      : R(epoll_ctl)(epfd, op, fd, ev);
			if (rc < 0 && !had) {
				int e = errno;
				ep_kid_set(o, fd, EPOLL_CTL_DEL, 0);
				errno = e;
			}
			pthread_mutex_unlock(&o->lock);
			if (rc == 0)
				ep_expose_fd(fd);
			return rc;
		}
		int rc = R(epoll_ctl)(epfd, op, fd, ev);
		if (rc == 0 && op == EPOLL_CTL_DEL && (o = ep_get(epfd, false))) {
			pthread_mutex_lock(&o->lock);
			ep_kid_set(o, fd, EPOLL_CTL_DEL, 0);
			pthread_mutex_unlock(&o->lock);
		}
		return rc;
	}

	struct sc_sock *s = sock_get(fd);
	struct sc_ep *e = ep_get(epfd, false);
	struct sc_epreg *r = NULL;
	if (!e && s && atomic_load_explicit(&neps, memory_order_acquire) && !ep_of(epfd))
		e = ep_copy_of(epfd, false);    /* a copy of a set of ours we did not see made? */

	if (e) {
		pthread_mutex_lock(&e->lock);
		for (r = e->regs; r && r->fd != fd; r = r->next)
			;
		if (r && r->s != s) {
			/* the fd number now names another socket */
			reg_free(e, r);
			r = NULL;
		}
		if (!r)
			pthread_mutex_unlock(&e->lock);
	}
	if (!r) {
		if (s && op == EPOLL_CTL_ADD && atomic_load(&s->mode) == M_SPENDING)
			server_settle(fd, s);
		int mode = s ? atomic_load(&s->mode) : M_TCP;
		struct sc_ep *f = ep_of(epfd);
		if (mode == M_SHM && op == EPOLL_CTL_ADD && f && atomic_load(&f->child_used)) {
			/* a child waits in this set too: it can only see a
			 * kernel socket (so long as it lives) */
			if (kid_may_hold(0)) {
				sock_switch(fd, s);
				mode = atomic_load(&s->mode);
			} else {
				atomic_store(&f->child_used, false);
			}
		}
		if (op != EPOLL_CTL_ADD || (mode != M_PENDING && mode != M_SHM) || !ev)
			return R(epoll_ctl)(epfd, op, fd, ev);
		if (fd == epfd) {
			errno = EINVAL;
			return -1;
		}
		/* creating our shadow registers the cookie in epfd: the
		 * kernel checks epfd there (EBADF, EINVAL) */
		e = ep_get(epfd, true);
		if (!e)
			return -1;
		r = calloc(1, sizeof(*r));
		if (!r) {
			errno = ENOMEM;
			return -1;
		}
		r->fd = fd;
		r->s = s;
		r->deleted = true;
		r->wfd[0] = r->wfd[1] = -1;
		pthread_mutex_lock(&e->lock);
		r->next = e->regs;
		e->regs = r;
	}
	/* r is ours, e locked.  A deleted registration stays (dormant, its
	 * watch in place) so that the DEL/ADD pairs event loops make per
	 * request cost no system call. */
	int rc = 0;
	bool unbind = false;
	switch (op) {
	case EPOLL_CTL_ADD:
		if (!r->deleted) {
			errno = EEXIST;
			rc = -1;
			break;
		}
		/* the kernel's rule: EPOLLEXCLUSIVE goes with these only */
		if ((ev->events & EPOLLEXCLUSIVE) &&
		    (ev->events & ~(uint32_t)(EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP |
					      EPOLLET | EPOLLEXCLUSIVE))) {
			errno = EINVAL;
			rc = -1;
			break;
		}
		r->deleted = false;
		r->exclusive = ev->events & EPOLLEXCLUSIVE;
		r->events = ev->events & ~(EPOLLEXCLUSIVE | EPOLLWAKEUP);
		r->data = ev->data;
		r->disabled = false;
		r->seen = 0;
		r->sig_in = r->sig_out = r->sig_fl = 0;
		r->force_edge = true;
		if (r->kind == M_SHM)
			fired_add(e, r);        /* re-arm for this interest */
		bool gone;
		reg_eval(e, r, &gone);  /* sets up the watch; may hand back to TCP */
		if (!gone)
			check_add(e, r);
		break;
	case EPOLL_CTL_DEL:
		if (r->deleted) {
			errno = ENOENT;
			rc = -1;
			break;
		}
		r->deleted = true;
		unbind = r->shared && !r->second;     /* (a second channel stays) */
		break;
	case EPOLL_CTL_MOD:
		if (r->deleted) {
			errno = ENOENT;
			rc = -1;
			break;
		}
		if (!ev || (ev->events & EPOLLEXCLUSIVE) || r->exclusive) {
			errno = EINVAL;
			rc = -1;
			break;
		}
		r->events = ev->events & ~EPOLLWAKEUP;
		r->data = ev->data;
		r->disabled = false;
		r->force_edge = true;   /* polled afresh: an edge if ready */
		check_add(e, r);
		fired_add(e, r);        /* re-arm for the new interest before sleeping */
		break;
	default:
		errno = EINVAL;
		rc = -1;
	}
	pthread_mutex_unlock(&e->lock);
	if (rc == 0 && op != EPOLL_CTL_DEL && atomic_load(&e->sleepers)) {
		/* another thread is asleep in the kernel's wait on this set
		 * (in ours, or passed through before the set had a shadow):
		 * the kernel would wake it for an entry ready now, and for
		 * the next event of this one */
		int saved = errno;
		ep_wake_sleepers(e);
		errno = saved;
	}
	if (unbind && ep_elsewhere(e, s)) {
		/* another set watches it through our channel, which only our
		 * waits arm: the dormant entry lets go of it for good */
		pthread_mutex_lock(&e->lock);
		struct sc_epreg *q = e->regs;
		while (q && q != r)
			q = q->next;
		bool sibs = false;      /* another live entry of ours (a dup'd fd) */
		if (q && s->c)
			for (struct sc_epreg *x = sc_conn_user(s->c); x; x = x->sib)
				sibs |= x != r && !x->deleted;
		if (q && r->deleted && r->shared && s->c && !sibs) {
			/* every entry of the chain lets go, and is watched
			 * anew if it is ADDed again */
			for (struct sc_epreg *x = sc_conn_user(s->c), *nx; x; x = nx) {
				nx = x->sib;
				x->sib = NULL;
				if (x != r) {
					x->shared = false;
					reg_unwatch(e, x);
				}
			}
			sc_conn_set_user(s->c, NULL);
			sc_chan_bind(s->c, NULL);
			r->shared = false;
			reg_unwatch(e, r);
		}
		pthread_mutex_unlock(&e->lock);
		ep_rewatch(e, &s, 1);
	}
	if (e->exposed) {
		/* watched from outside: readable as its entries now are */
		int saved = errno;
		ep_expose(e);
		errno = saved;
	}
	return rc;
}

/* EPOLLET: the connection's state as edges are told from (its cursors and
 * flags).  Taken before its readiness is evaluated: a change after that
 * shows at the next look instead of being counted as reported. */
static void reg_sig(struct sc_epreg *r, uint64_t sig[3])
{
	sig[0] = r->sig_in;
	sig[1] = r->sig_out;
	sig[2] = r->sig_fl;
	if (!r->s->c || atomic_load(&r->s->mode) != M_SHM)
		return;
	struct sc_conn *c = r->s->c;
	uint64_t fl = atomic_load_explicit(&c->peer->flags, memory_order_acquire) |
		      (uint64_t)atomic_load(&c->lflags) << 32;
	sig[0] = atomic_load_explicit(&c->rx.h->prod, memory_order_acquire) ^ fl * 0x9e3779b97f4a7c15ull;
	sig[1] = atomic_load_explicit(&c->tx.h->cons, memory_order_acquire) ^ fl * 0x9e3779b97f4a7c15ull;
	sig[2] = fl | (uint64_t)r->s->sent_to_closed << 31;
}

/* EPOLLET: ev if the state (reg_sig, taken before ev) changed since last
 * reported in a way the entry wants to hear of (new data, new room, a new
 * state, as the kernel's wake-ups are; room when only input is wanted is
 * no edge; a hang-up or error only when the state changed); an edge
 * reports the whole present mask, as the kernel's does (a data arrival
 * gives IN|OUT to an entry that wants both).  commit records it. */
static uint32_t reg_edge(struct sc_epreg *r, uint32_t ev, const uint64_t sig[3], bool commit)
{
	if (!r->s->c || atomic_load(&r->s->mode) != M_SHM)
		return ev;
	bool edge = r->force_edge ||
		    ((ev & (EPOLLHUP | EPOLLERR)) && sig[2] != r->sig_fl) ||
		    ((r->events & (EPOLLIN | EPOLLRDHUP)) && sig[0] != r->sig_in) ||
		    ((r->events & EPOLLOUT) && sig[1] != r->sig_out);
	if (commit) {
		r->sig_in = sig[0];
		r->sig_out = sig[1];
		r->sig_fl = sig[2];
		r->force_edge = false;
	}
	return edge ? ev : 0;
}

/* Evaluate the check list into out[n..max); returns the new n. */
static int ep_harvest(struct sc_ep *e, struct epoll_event *out, int n, int max, uint64_t call)
{
	pthread_mutex_lock(&e->lock);
	struct sc_epreg *list = e->check;
	e->check = NULL;
	while (list) {
		struct sc_epreg *r = list;
		list = r->cnext;
		r->listed = false;
		if (r->disabled || r->deleted)
			continue;
		if (n >= max || r->seen == call) {
			check_add(e, r);
			continue;
		}
		bool gone;
		uint64_t sig[3];
		reg_sig(r, sig);
		uint32_t ev = reg_eval(e, r, &gone);
		if (!gone && r->foreign && !r->listed)
			check_add(e, r);        /* its wake-ups may be another set's */
		if (gone || !ev)
			continue;
		if ((r->events & EPOLLET) && !(ev = reg_edge(r, ev, sig, true)))
			continue;
		out[n].events = ev;
		out[n].data = r->data;
		n++;
		r->seen = call;
		if (r->events & EPOLLONESHOT)
			r->disabled = true;
		else if (!(r->events & EPOLLET))
			check_add(e, r);        /* level: ask again next time */
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

/* Re-arm every connection signalled since it was last armed, and queue it
 * for a look (armed first, then looked at); collect the channel, arming
 * its cells too when about to sleep.  Returns whether any was queued. */
static bool ep_arm(struct sc_ep *e, bool sleep)
{
	bool any = false;
	pthread_mutex_lock(&e->lock);
	while (e->fired) {
		struct sc_epreg *r = e->fired;
		e->fired = r->fnext;
		r->fired = false;
		struct sc_sock *s = r->s;
		if (atomic_load(&s->mode) == M_SHM && s->owner == my_pid) {
			if (!r->shared)
				sc__chan_rearm_poll(s->c);
			sc__conn_poll_arm(s->c, (r->events & EPOLLOUT) ||
					  (r->second && s->c->polled_out));
		}
		check_add(e, r);
		any = true;
	}
	/* anything that came meanwhile (and the cells armed, to sleep) */
	if (ep_collect(e, sleep))
		any = true;
	pthread_mutex_unlock(&e->lock);
	return any;
}

/*
 * A set watched from outside (nested in another epoll set, or polled) is not
 * armed by our epoll_wait while the program sleeps elsewhere: arm its
 * channel now, and make its fd readable in the kernel if a registration is
 * ready already (the kernel's rule: an epoll fd is readable while it has
 * ready entries).  Called when it is added to a set or polled, and at the
 * end of each of its own epoll_waits.
 */
static bool ep_ready_now(struct sc_ep *e)
{
	bool ready = false;
	struct sc_epreg *r = e->check;
	while (r && !ready) {
		struct sc_epreg *next = r->cnext;       /* r may be freed */
		bool gone;
		uint32_t ev;
		uint64_t sig[3];
		reg_sig(r, sig);
		if (!r->disabled && !r->deleted && (ev = reg_eval(e, r, &gone)) &&
		    (!(r->events & EPOLLET) || reg_edge(r, ev, sig, false)))
			ready = true;
		r = next;
	}
	return ready;
}

static void ep_hold(struct sc_ep *e, bool ready)
{
	if (ready != e->held) {
		e->held = ready;
		atomic_fetch_add(&nexp_sig, ready ? 1 : -1);
	}
}

static void ep_expose_depth(struct sc_ep *e, int depth);

/* The sets nested in e, armed and made readable as they should be. */
static void ep_expose_kids(struct sc_ep *e, int depth)
{
	int kids[8], nk = 0;
	if (!e->kids || depth >= 5)     /* the kernel nests no deeper */
		return;
	pthread_mutex_lock(&e->lock);
	for (struct sc_epkid *k = e->kids; k && nk < 8; k = k->next)
		kids[nk++] = k->fd;
	pthread_mutex_unlock(&e->lock);
	pthread_rwlock_rdlock(&ep_life);
	for (int i = 0; i < nk; i++) {
		struct sc_ep *k = ep_get(kids[i], false);
		if (k && k != e && k->exposed)
			ep_expose_depth(k, depth + 1);
	}
	pthread_rwlock_unlock(&ep_life);
}

static void ep_expose_depth(struct sc_ep *e, int depth)
{
	/* the sets nested in it first: their readiness is part of its own */
	ep_expose_kids(e, depth);
	pthread_mutex_lock(&e->lock);
	if (ep_chan_ensure(e) < 0) {
		pthread_mutex_unlock(&e->lock);
		return;
	}
	pthread_mutex_unlock(&e->lock);
	ep_arm(e, false);
	pthread_mutex_lock(&e->lock);
	bool ready = ep_ready_now(e);
	if (ready) {
		/* armed without a reset: the fd stays readable, and the
		 * next arrival signals it again (a new edge for an EPOLLET
		 * watcher, as the kernel gives one per arrival) */
		sc__chan_arm_keep(e->ch);
		if (!sc__chan_readable(e->ch))
			sc__chan_signal(e->ch);
	} else {
		/* a wake-up left readable by an earlier arm_keep, or for an
		 * entry since deleted or drained: reset, then arm */
		sc__chan_reset(e->ch);
		pthread_mutex_unlock(&e->lock);
		ep_arm(e, true);
		pthread_mutex_lock(&e->lock);
		if ((ready = ep_ready_now(e)))
			sc__chan_signal(e->ch);
	}
	ep_hold(e, ready);
	pthread_mutex_unlock(&e->lock);
}

static void ep_expose(struct sc_ep *e)
{
	ep_expose_depth(e, 0);
}

/* An event the kernel reported for a set nested in e (data as registered):
 * is that set really ready?  Its channel may hold a wake-up for a
 * connection since deleted or drained. */
static bool ep_kid_ready(struct sc_ep *e, uint64_t *data)
{
	int fd = -1;
	pthread_mutex_lock(&e->lock);
	for (struct sc_epkid *k = e->kids; k; k = k->next)
		if (k->cookie == *data) {
			fd = k->fd;
			*data = k->data;        /* the program's */
		}
	pthread_mutex_unlock(&e->lock);
	if (fd < 0)
		return false;           /* deleted meanwhile */
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *k = fd >= 0 ? ep_get(fd, false) : NULL;
	if (k && k != e)
		ep_expose(k);
	pthread_rwlock_unlock(&ep_life);
	if (!k || k == e)
		return true;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return R(poll)(&p, 1, 0) > 0;
}

/* e->lock held: remember (or forget) a set nested in e. */
static void ep_kid_set(struct sc_ep *e, int fd, int op, uint64_t data)
{
	static _Atomic uint32_t next_id;
	struct sc_epkid **pp = &e->kids, *k;
	while ((k = *pp) && k->fd != fd)
		pp = &k->next;
	if (op == EPOLL_CTL_DEL) {
		if (k) {
			*pp = k->next;
			free(k);
		}
		return;
	}
	if (!k && (k = calloc(1, sizeof(*k)))) {
		k->fd = fd;
		k->cookie = kid_cookie(atomic_fetch_add(&next_id, 1));
		k->next = e->kids;
		e->kids = k;
	}
	if (k)
		k->data = data;
}

/* e->lock held: the kernel set's data for the nested set fd (0: none). */
static uint64_t ep_kid_cookie(struct sc_ep *e, int fd)
{
	for (struct sc_epkid *k = e->kids; k; k = k->next)
		if (k->fd == fd)
			return k->cookie;
	return 0;
}

/* Bytes were read from an accelerated fd while an exposed set is held
 * readable: look again, as the kernel's nested poll would (LT: a set with
 * nothing ready left is not readable). */
static void ep_refresh_exposed(void)
{
	struct sc_ep *list[16];
	int n = 0, saved = errno;

	pthread_rwlock_rdlock(&ep_life);
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e && n < 16; e = e->next)
		if (e->exposed && e->held)
			list[n++] = e;
	pthread_mutex_unlock(&eps_lock);
	for (int i = 0; i < n; i++)
		ep_expose(list[i]);
	pthread_rwlock_unlock(&ep_life);
	errno = saved;
}

/* fd is watched from outside (epoll_ctl into another set, poll, select):
 * if it is an epoll set of the program's, expose it. */
static void ep_expose_fd(int fd)
{
	struct sc_ep *f = ep_of(fd);
	if (!f)
		return;
	f->exposed = true;
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *e = ep_get(fd, false);
	if (e) {
		int saved = errno;
		ep_expose(e);
		errno = saved;
	}
	pthread_rwlock_unlock(&ep_life);
}

static int ep_wait(struct sc_ep *e, int epfd, struct epoll_event *out, int max, int timeout,
		   const sigset_t *mask);

/* In a fork child: the nested sets of the sets we inherited, by cookie. */
static struct inh_kid {
	uint64_t cookie, data;
} inh_kids[64];
static int n_inh_kids;

/* A kernel event with one of the cookies of a process sharing the set:
 * the data to report for it (a nested set we inherited), or false to drop
 * it (the other process's inner set, or a nested set we know nothing of). */
static bool cookie_inherited(uint64_t *data)
{
	if (!is_kid_cookie(*data))
		return false;
	for (int j = 0; j < n_inh_kids; j++)
		if (inh_kids[j].cookie == *data) {
			*data = inh_kids[j].data;
			return true;
		}
	return false;
}

/* The kernel's wait itself: epoll_pwait2 with the program's own timespec
 * where it gave one (ms == EP_TS), else epoll_wait / epoll_pwait in ms. */
#define EP_TS INT_MIN
static int kernel_wait(int epfd, struct epoll_event *out, int max, int ms,
		       const struct timespec *ts, const sigset_t *mask)
{
	if (ms == EP_TS)
		return R(epoll_pwait2)(epfd, out, max, ts, mask);
	return mask ? R(epoll_pwait)(epfd, out, max, ms, mask) : R(epoll_wait)(epfd, out, max, ms);
}

static int ms_left(uint64_t end)
{
	if (end == UINT64_MAX)
		return -1;
	uint64_t now = now_ns();
	return now >= end ? 0 : (int)((end - now + 999999) / 1000000);
}

/*
 * A wait on a set with no shadow of ours (or an fd we know nothing of):
 * the kernel's, but no cookie may reach the program.  A cookie of ours
 * means the set got a shadow while we slept (another thread registered an
 * accelerated fd) or is a copy of a shadowed set we did not see made: the
 * wait goes on through the shadow.  Another process's (a set shared across
 * fork) is dropped, or translated (a nested set we inherited).
 */
static int ep_kernel_wait(struct sc_ep *f, int epfd, struct epoll_event *out, int max,
			  int timeout, const struct timespec *ts, const sigset_t *mask)
{
	uint64_t end = UINT64_MAX;
	if (timeout >= 0)
		end = now_ns() + (uint64_t)timeout * 1000000u;
	else if (timeout == EP_TS)
		end = now_ns() + (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
	int t = timeout;
	for (;;) {
		if (f && t)
			atomic_fetch_add(&f->sleepers, 1);
		int k = kernel_wait(epfd, out, max, t, ts, mask);
		if (f && t)
			atomic_fetch_sub(&f->sleepers, 1);
		if (k <= 0)
			return k;
		int m = 0;
		uint64_t ours = 0;
		for (int i = 0; i < k; i++) {
			uint64_t v = out[i].data.u64;
			if ((is_cookie(v) || is_kid_cookie(v)) && cookie_mine(v)) {
				ours = v;
				continue;
			}
			if (is_cookie(v) || (is_kid_cookie(v) && !cookie_inherited(&v)))
				continue;
			out[m] = out[i];
			out[m++].data.u64 = v;
		}
		if (ours) {
			/* the set is (a copy of) one of our shadowed sets now */
			struct sc_ep *e = ep_get(epfd, false);
			if (!e)
				e = ep_copy_of(epfd, false);
			if (e) {
				int n = ep_wait(e, epfd, out + m, max - m, m ? 0 : ms_left(end), mask);
				return n < 0 ? (m ? m : -1) : m + n;
			}
		}
		if (m)
			return m;
		/* only cookies: wait on, for the time left */
		t = ms_left(end);
		ts = NULL;
		if (t == 0)
			return 0;
	}
}

static int do_epoll_wait(int epfd, struct epoll_event *out, int max, int timeout,
			 const struct timespec *ts, const sigset_t *mask)
{
	struct sc_ep *f = ep_of(epfd);
	if (!f && atomic_load_explicit(&neps, memory_order_acquire)) {
		/* an epoll fd we did not see made (SCM_RIGHTS): a copy of a
		 * set of ours?  (looked at once: then it is known) */
		ep_copy_of(epfd, true);
		f = ep_of(epfd);
	}
	if (f && atomic_load_explicit(&ep_inh, memory_order_relaxed))
		ep_inherited_use(f);
	struct sc_ep *e = f && f->inner >= 0 ? f : NULL;
	if (!e || max <= 0)
		return ep_kernel_wait(f, epfd, out, max, timeout, ts, mask);
	if (timeout == EP_TS) {
		/* our sets wait in milliseconds: round up, as the kernel's
		 * epoll_wait does (never wake before the time asked) */
		uint64_t m = (uint64_t)ts->tv_sec * 1000 + ((uint64_t)ts->tv_nsec + 999999) / 1000000;
		timeout = m > INT_MAX ? INT_MAX : (int)m;
	}
	int n = ep_wait(e, epfd, out, max, timeout, mask);
	if (e->ch && atomic_load(&e->sleepers)) {
		/* another thread sleeps in this set: leave the channel armed,
		 * or a wake-up meant for it would not come */
		int saved = errno;
		ep_arm(e, true);
		errno = saved;
	}
	if (e->exposed) {
		int saved = errno;
		ep_expose(e);
		errno = saved;
	}
	return n;
}

static int ep_wait(struct sc_ep *e, int epfd, struct epoll_event *out, int max, int timeout,
		   const sigset_t *mask)
{
	uint64_t end = timeout < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout * 1000000u;
	int n = 0;
	pthread_mutex_lock(&e->lock);
	uint64_t call = ++e->calls;
	pthread_mutex_unlock(&e->lock);
	for (;;) {
		/* re-arm what was signalled and collect the channel at every
		 * call, not only before sleeping: a program that polls with
		 * a zero timeout would otherwise never be told again */
		ep_arm(e, false);
		n = ep_harvest(e, out, n, max, call);
		if (n >= max)
			return n;
		uint64_t now = now_ns();
		int t = n ? 0 : end == UINT64_MAX ? -1 :
			now >= end ? 0 : (int)((end - now + 999999) / 1000000);
		if (t) {
			/* about to sleep: arm the channel, then look once more
			 * (whatever came before the arming is in the collect);
			 * nested sets armed too, since nobody waits on them */
			ep_expose_kids(e, 0);
			ep_arm(e, true);

			n = ep_harvest(e, out, n, max, call);
			if (n >= max)
				return n;
			if (n)
				t = 0;
		}
		/* no more than the room left: every event the kernel hands
		 * over fits (an EPOLLET one dropped would be lost); when the
		 * cookie takes a slot, the inner set's entries fill the rest */
		struct epoll_event kbuf[64];
		int room = max - n < 64 ? max - n : 64;
		if (t)
			atomic_fetch_add(&e->sleepers, 1);
		int k = mask ? R(epoll_pwait)(epfd, kbuf, room, t, mask)
			     : R(epoll_wait)(epfd, kbuf, room, t);
		if (t)
			atomic_fetch_sub(&e->sleepers, 1);
		if (k < 0)
			return n ? n : -1;
		bool inner = false;
		int kept = 0;
		for (int i = 0; i < k; i++) {
			uint64_t d = kbuf[i].data.u64;
			if (d == e->cookie)
				inner = true;
			else if (is_cookie(d))
				continue;       /* another process's (a set shared by fork) */
			else if (is_kid_cookie(d)) {
				if (cookie_mine(d) ? !ep_kid_ready(e, &d) : !cookie_inherited(&d))
					continue;       /* a nested set with nothing ready */
				out[n + kept] = kbuf[i];
				out[n + kept++].data.u64 = d;
			} else {
				out[n + kept++] = kbuf[i];      /* k <= room */
			}
		}
		n += kept;
		if (inner) {
			struct epoll_event iev[64];
			int m = R(epoll_wait)(e->inner, iev, 64, 0);
			pthread_mutex_lock(&e->lock);
			for (int i = 0; i < m; i++) {
				if (iev[i].data.ptr == &ep_chan_mark) {
					/* a wake-up's datagram: reset the fd now,
					 * or every call until we sleep again would
					 * find the cookie (the tokens stay taken:
					 * no more datagrams while we are awake) */
					if (!atomic_load_explicit(&nforeign, memory_order_relaxed))
						sc__chan_reset(e->ch);
					ep_collect(e, false);
					continue;
				}
				struct sc_epreg *r = iev[i].data.ptr;
				/* still registered? (DEL may have raced) */
				struct sc_epreg *q = e->regs;
				while (q && q != r)
					q = q->next;
				if (q) {
					check_add(e, r);
					if (!r->fired) {
						r->fired = true;
						r->fnext = e->fired;
						e->fired = r;
					}
				}
			}
			pthread_mutex_unlock(&e->lock);
			/* evaluate them now; the kernel's part is already in
			 * (asking it again would report a level fd twice) */
			n = ep_harvest(e, out, n, max, call);
		}
		if (n || (t >= 0 && now_ns() >= end))
			return n;
	}
}

EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	return do_epoll_wait(epfd, ev, max, timeout < 0 ? -1 : timeout, NULL, NULL);
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	return do_epoll_wait(epfd, ev, max, timeout < 0 ? -1 : timeout, NULL, mask);
}

EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
			const sigset_t *mask)
{
	if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000))
		return R(epoll_pwait2)(epfd, ev, max, ts, mask);        /* the kernel's EINVAL */
	return do_epoll_wait(epfd, ev, max, ts ? EP_TS : -1, ts, mask);
}

/* Connections in socks left a channel that other sets watched them
 * through: those sets (but except) watch them anew, on their own channel. */
static void ep_rewatch(struct sc_ep *except, struct sc_sock **socks, size_t n)
{
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *o = eps; o; o = o->next) {
		if (o == except)
			continue;
		pthread_mutex_lock(&o->lock);
		struct sc_epreg *r = o->regs;
		while (r) {
			struct sc_epreg *next = r->next;        /* r may be freed */
			for (size_t i = 0; i < n; i++)
				if (r->s == socks[i] && r->kind == M_SHM && !r->shared && !r->deleted) {
					bool gone;
					reg_unwatch(o, r);
					reg_eval(o, r, &gone);  /* binds it here now */
					if (!gone)
						check_add(o, r);
					break;
				}
			r = next;
		}
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&eps_lock);
}

/* Is s registered in a set other than e? */
static bool ep_elsewhere(struct sc_ep *e, struct sc_sock *s)
{
	bool found = false;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *o = eps; o && !found; o = o->next) {
		if (o == e)
			continue;
		pthread_mutex_lock(&o->lock);
		for (struct sc_epreg *r = o->regs; r && !found; r = r->next)
			found = r->s == s && !r->deleted;
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&eps_lock);
	return found;
}

/* In the child after fork: the shadows are the parent's (their inner sets,
 * channels and entries).  Drop our copies without touching what they name;
 * a set the child uses gets a shadow of its own, under its own cookie. */
/* s went back to TCP: every set of ours that watches it hands it to the
 * kernel's set now, as its next epoll_wait would. */
static void ep_switched(struct sc_sock *s, bool child_set)
{
	if (!atomic_load_explicit(&neps, memory_order_acquire))
		return;
	pthread_rwlock_rdlock(&ep_life);
	struct sc_ep *sets[64];
	int n = 0;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e && n < 64; e = e->next)
		sets[n++] = e;
	pthread_mutex_unlock(&eps_lock);
	for (int i = 0; i < n; i++) {
		struct sc_ep *e = sets[i];
		pthread_mutex_lock(&e->lock);
		struct sc_epreg *r = e->regs;
		while (r) {
			struct sc_epreg *next = r->next;
			if (r->s == s) {
				struct epoll_event ev = { .events = r->events, .data = r->data };
				if (child_set)
					atomic_store(&e->child_used, true);
				/* a fired EPOLLONESHOT entry stays in the set,
				 * silent but for a hang-up, until MOD re-arms it */
				if (r->disabled)
					ev.events = EPOLLONESHOT | EPOLLET;
				/* (the fd may have been closed meanwhile, and
				 * its number reused: then it is gone) */
				if (!r->deleted && sock_get(r->fd) == s)
					R(epoll_ctl)(e->fd, EPOLL_CTL_ADD, r->fd, &ev);
				reg_free(e, r);
			}
			r = next;
		}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_rwlock_unlock(&ep_life);
}

/* In a fork child: the accelerated fds of the sets we inherited (our
 * parent's, registered before the fork; the list is only ever touched by
 * the child's first calls on those sets).  Our first call on such a set
 * has the owner switch them back to TCP, which puts them in the kernel's
 * set that parent and child share. */
static void ep_inherited_use(struct sc_ep *e)
{
	struct ep_inh *mine = NULL;
	if (!e)
		return;
	pthread_mutex_lock(&ep_inh_lock);
	for (struct ep_inh *_Atomic *pp = &ep_inh; *pp;) {
		struct ep_inh *x = *pp;
		if (x->ep == e) {
			*pp = x->next;
			x->next = mine;
			mine = x;
		} else {
			pp = &x->next;
		}
	}
	pthread_mutex_unlock(&ep_inh_lock);
	while (mine) {
		struct ep_inh *x = mine;
		mine = x->next;
		struct sc_sock *s = sock_get(x->fd);
		if (s && atomic_load(&s->mode) == M_SHM)
			sw_request_owner_(x->fd, s, SC_SWREQ_USE | SC_SWREQ_EPOLL, 30000000000ull);
		free(x);
	}
}

static void ep_atfork_child(void)
{
	pthread_mutex_init(&eps_lock, NULL);
	pthread_mutex_init(&ep_inh_lock, NULL);
	pthread_rwlock_init(&ep_life, NULL);
	struct sc_ep *e = eps;
	eps = NULL;
	atomic_store(&neps, 0);
	atomic_store(&nexp_sig, 0);
	atomic_store(&nforeign, 0);
	/* the sets are the same objects here (our fds name them), shared */
	for (unsigned p = 0; p < NPAGES; p++) {
		struct sc_ep *_Atomic *pg = atomic_load(&ep_pages[p]);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			struct sc_ep *f = atomic_load_explicit(&pg[i], memory_order_relaxed);
			if (f) {
				f->shared = true;
				pthread_mutex_init(&f->lock, NULL);
				atomic_store(&f->sleepers, 0);
			}
		}
	}
	while (e) {
		struct sc_ep *next = e->next;
		e->next = NULL;
		while (e->regs) {
			struct sc_epreg *r = e->regs;
			e->regs = r->next;
			struct ep_inh *x;
			if (r->kind == M_SHM && !r->deleted && (x = malloc(sizeof(*x)))) {
				x->ep = e;
				x->fd = r->fd;
				x->next = atomic_load(&ep_inh);
				atomic_store(&ep_inh, x);
			}
			free(r);
		}
		while (e->kids) {
			struct sc_epkid *k = e->kids;
			e->kids = k->next;
			if (n_inh_kids < 64)    /* ep_kernel_wait puts their data back */
				inh_kids[n_inh_kids++] = (struct inh_kid){ k->cookie, k->data };
			free(k);
		}
		if (e->ch)
			sc__chan_abandon(e->ch);
		e->ch = NULL;
		R(close)(e->inner);
		/* the parent's shadow: the child makes one of its own if need be */
		e->inner = -1;
		e->cookie = 0;
		e->check = e->fired = NULL;
		e->held = false;
		e = next;
	}
}

/* close_range / closefrom: the epoll fds in [first, last] */
static void ep_close_range(unsigned first, unsigned last)
{
	for (unsigned p = first >> PAGE_BITS; p < NPAGES && (p << PAGE_BITS) <= last; p++) {
		struct sc_ep *_Atomic *pg = atomic_load(&ep_pages[p]);
		for (unsigned i = 0; pg && i < (1u << PAGE_BITS); i++) {
			unsigned fd = (p << PAGE_BITS) | i;
			if (fd >= first && fd <= last && atomic_load(&pg[i]))
				ep_close((int)fd);
		}
	}
}

/* An epoll fd is closed: it no longer names its set; the set's last fd
 * closed, the set is gone (as the kernel's), and our shadow of it. */
static void ep_close(int epfd)
{
	if (!ep_of(epfd) || in_vfork_child())
		return;
	pthread_mutex_lock(&eps_lock);
	struct sc_ep *e = ep_of(epfd);
	if (!e || ep_fd_del(e, epfd) > 0) {
		pthread_mutex_unlock(&eps_lock);
		return;
	}
	bool shadow = e->inner >= 0;
	if (shadow) {
		struct sc_ep **pp = &eps;
		while (*pp && *pp != e)
			pp = &(*pp)->next;
		if (*pp) {
			*pp = e->next;
			atomic_fetch_sub(&neps, 1);
		}
	}
	pthread_mutex_unlock(&eps_lock);
	if (!shadow) {
		pthread_rwlock_wrlock(&ep_life);
		pthread_rwlock_unlock(&ep_life);
		ep_free(e);
		return;
	}
	/* unlinked: no new user finds it; wait for those that did */
	pthread_rwlock_wrlock(&ep_life);
	pthread_rwlock_unlock(&ep_life);
	pthread_mutex_lock(&e->lock);
	/* connections bound to its channel: other sets watching them
	 * through it must watch them anew once they are back on their own */
	size_t nmoved = 0, cap = 0;
	struct sc_sock **moved = NULL;
	for (struct sc_epreg *r = e->regs; r; r = r->next)
		if (r->shared) {
			if (nmoved == cap) {
				cap = cap ? cap * 2 : 16;
				void *p = realloc(moved, cap * sizeof(*moved));
				if (!p)
					break;
				moved = p;
			}
			moved[nmoved++] = r->s;
		}
	while (e->regs)
		reg_free(e, e->regs);
	ep_hold(e, false);
	while (e->kids) {
		struct sc_epkid *k = e->kids;
		e->kids = k->next;
		free(k);
	}
	pthread_mutex_unlock(&e->lock);
	if (e->ch)
		sc_chan_close(e->ch);   /* its connections go back to their own */
	R(close)(e->inner);
	ep_free(e);
	if (nmoved)
		ep_rewatch(NULL, moved, nmoved);
	free(moved);
}

/* The last fd of s closed: it leaves every epoll set, as in the kernel. */
static void ep_forget_sock(struct sc_sock *s)
{
	if (!atomic_load_explicit(&neps, memory_order_acquire))
		return;
	pthread_mutex_lock(&eps_lock);
	for (struct sc_ep *e = eps; e; e = e->next) {
		pthread_mutex_lock(&e->lock);
		struct sc_epreg *r = e->regs;
		while (r) {
			struct sc_epreg *next = r->next;
			if (r->s == s)
				reg_free(e, r);
			r = next;
		}
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&eps_lock);
}
