/* SPDX-License-Identifier: MIT */
/*
 * The interposer's own header: what its files share.  The interposer is the
 * top layer (libshortcut.so only): it keeps the program's fd table, maps its
 * socket calls onto the shared-memory core (src/core) and finds peers
 * through the run directory (src/rundir).  Nothing below calls up into it,
 * except through the hooks the core offers (link.h).
 *
 * One concern per file:
 *   real.c        the real libc functions (calls.h: every call we define)
 *   preload.c     start-up, configuration, logging
 *   fdtable.c     fd -> socket table, a socket's life, dup aliasing, records
 *   pending.c     a client whose offer is not answered yet; OPENs for it
 *   connect.c     socket, connect: a listener looked for, the offer posted
 *   handshake.c   listen, accept: board entries, offers claimed
 *   data.c        the send and receive families
 *   splice.c      splice and sendfile: a pipe's or a file's bytes
 *   sockopt.c     getsockopt, setsockopt, ioctl, fcntl
 *   close.c       shutdown, close, close_range, closefrom, dup*
 *   switch.c      switching a live connection back to TCP
 *   fork.c        fork, and connections shared with children and owners
 *   exec.c        the exec family, posix_spawn, system, popen
 *   uring.c       io_uring set-up, syscall()
 *   poll.c        poll, select and the readiness of one socket
 *   epoll_set.c   epoll sets: one per open file description, cookies, life
 *   epoll_ctl.c   registrations, channels, epoll_ctl
 *   epoll_wait.c  the waits, nested and exposed sets
 *   shortconn.c   short connections: which ports' connections stay on TCP
 *   linger.c      a client's close: its kernel socket waits for the server's FIN
 *   devmem.c      the devmem socket API (MSG_SOCK_DEVMEM, its cmsgs, zerocopy)
 *   netlink.c     generic netlink: netdev bind-rx / bind-tx of loopback
 *   go.c          Go programs: their system-call funnel patched to come here
 *
 * Every call on a socket of ours is lookup (sock_get), route (sock_route:
 * settle, then one read of the mode and the owner), dispatch on the route;
 * a call on any other fd passes through to libc.
 *
 * Locks nest in one order, outermost first (src/core/lockorder.h ranks
 * them, and the ASan interposer of `make test-preload-asan` checks every
 * acquisition against it; what each protects: docs/interposer.md §6b):
 *   ep_life (read) > eps_lock > a set's lock > a socket's lock >
 *   interp.create_lock > sw_start's lock > [the core's] > interp.rdv_lock > sw_thread.lock >
 *   table_lock > hidden_lock > kreg_lock > forked.lock > [run directory:
 *   child_lock > retired_lock > board_lock > lk_lock > self_lock] > nl_lock > lg_lock;
 *   a socket's wlock and ep_inh_lock alone.
 */
#ifndef SC_INTERPOSER_H
#define SC_INTERPOSER_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "calls.h"
#include "lockorder.h"
#include "compat.h"
#include "conn.h"
#include "rundir.h"
#include "stats.h"

/* ---- the real functions (real.c) ----------------------------------------- */

extern ssize_t __read_chk(int, void *, size_t, size_t);
extern ssize_t __recv_chk(int, void *, size_t, size_t, int);
extern ssize_t __recvfrom_chk(int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *);
extern int __poll_chk(struct pollfd *, nfds_t, int, size_t);
extern int __ppoll_chk(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);
struct io_uring;
struct io_uring_params;

#define SC_REAL_DECL(f, file) extern __typeof__(f) *real_##f;
#define SC_REAL_DECLT(f, file, type) typedef __typeof__(type) sc_real_t_##f; extern sc_real_t_##f *real_##f;
SC_CALLS(SC_REAL_DECL, SC_REAL_DECLT)

extern pthread_once_t real_once;
extern _Atomic bool real_ready;
void real_init(void);
/* The libc function f itself (loaded on first use).  Once loaded, one
 * load of real_ready: not a call into libc's pthread_once on every call
 * the program makes. */
static inline void real_ensure(void)
{
	if (__builtin_expect(!atomic_load_explicit(&real_ready, memory_order_acquire), 0))
		pthread_once(&real_once, real_init);
}
#define R(f) (real_ensure(), real_##f)

/* ---- errors: -errno inside, errno once at the shim's exit ----------------
 *
 * A function of the interposer returns a count (>= 0) or -errno; the shim
 * (the function the program called) sets errno once, as it returns:
 * sc_ret.  A handler that may decline a call (dm_*, nl_*) returns
 * NOT_MINE, below every -errno: the shim then goes on as if it had not
 * asked.  Work of ours beside the program's call (logging, bookkeeping, a
 * probe that may fail) keeps the errno the program sees: KEEP_ERRNO() at
 * the top of its block puts it back when the block ends (systemd's
 * PROTECT_ERRNO), so never in a block whose return sets errno. */
#define NOT_MINE (-4096)

static inline ssize_t sc_ret(ssize_t rc)
{
	if (rc >= 0)
		return rc;
	errno = (int)-rc;
	return -1;
}

static inline void errno_put_back(const int *saved)
{
	/* (only if changed: errno's page is the thread's, which a fork
	 * write-protects; a forking server's parent took a copy-on-write
	 * fault at every fork for a value that was there already) */
	if (errno != *saved)
		errno = *saved;
}
#define KEEP_ERRNO() \
	int errno_kept_ __attribute__((cleanup(errno_put_back), unused)) = errno

/* ---- the process (preload.c) -------------------------------------------- */

struct sc_sock;
struct sc_listener;

struct sc_interposer {
	bool disabled;
	int log;
	uint32_t claim_ms;
	bool ok;                /* configuration valid and run directory usable */
	bool uring;             /* the program set up an io_uring: nothing new */
	struct sc_listener *rdv;        /* our rendezvous (clients), lazily */
	/* (the lock order of these and the others: docs/interposer.md §6b) */
	pthread_mutex_t rdv_lock;       /* pending (taken under a group lock) */
	pthread_mutex_t create_lock;    /* rdv creation (takes link locks) */
	struct sc_sock *pending;        /* offers waiting for their OPEN */
	_Atomic int npending;           /* how many (changed under rdv_lock) */
};
extern struct sc_interposer interp;

void log_line(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define LOG(lvl, ...) do { if (interp.log >= (lvl)) log_line((lvl), __VA_ARGS__); } while (0)

/* ---- a socket of the program's (fdtable.c) ------------------------------- */

enum { M_TCP, M_LISTEN, M_SPENDING, M_PENDING, M_SHM };

#define PBUF_CAP SC_RING_MIN    /* a pending client's buffer: fits any ring */

#define SC_ZC_RANGES 8
struct sc_dm_rx;
struct sc_epreg;

struct sc_sock {
	pthread_mutex_t lock;   /* mode changes, the pending state; order: docs/interposer.md §6b */
	pthread_mutex_t wlock;  /* with wcond: sends wait while resending */
	pthread_cond_t wcond;
	_Atomic bool resending; /* switched back to TCP, and the bytes the peer
				 * never read are being re-sent (tcp_gate) */
	_Atomic int mode;
	int refs;               /* fds naming it (dup), under table_lock */
	bool nonblock;          /* O_NONBLOCK of the open file description */
	bool counted;           /* an established connection (bytes_tcp_*) */
	bool passive;           /* accepted or listening: never connect()s (sock_fresh) */
	bool nosyn;             /* listening, or accepted, where the kernel keeps
				 * no SYN (Multipath TCP: server_claim cannot
				 * see whether the client is accelerated) */
	bool linger0;
	bool shut_wr;           /* we shut down writing */
	bool err_reported;      /* a reset was reported once (as sk_err) */
	bool sent_to_closed;    /* one send went to a closed peer (TCP: then RST) */
	bool fastopen;          /* TCP_FASTOPEN_CONNECT / TCP_REPAIR set: stays TCP */
	bool tw_free;           /* connecting: the kernel reuses ports in TIME_WAIT
				 * to its destination (tw_reusable) */
	bool death_watched;     /* its kernel socket watched by the switch thread
				 * (SC_LF_DEATH_SWITCH: sw_deaths), under table_lock */
	uint64_t rcvtimeo_ns, sndtimeo_ns;      /* SO_RCVTIMEO / SO_SNDTIMEO, 0: none */
	int rcvlowat;                   /* SO_RCVLOWAT as the kernel keeps it; 0/1: none */
	int sndbuf, rcvbuf;     /* SO_SNDBUF / SO_RCVBUF as set (half the kernel's); 0: not */
	bool cork;              /* TCP_CORK */
	int tos, tclass;        /* the program's own IP_TOS, IPV6_TCLASS (-1: none) */
	int ttl, hops;          /* the program's own IP_TTL, IPV6_UNICAST_HOPS (-1: the
				 * default, as the kernel takes -1) */
	uint8_t syn_ttl;        /* connecting: the tag our SYN carries (0: none) */
	int cslot;              /* our connecting slot on the board (-1: none) */
	int declined;           /* board entry we declined for this connection, or -1 */
	/* data calls that moved bytes on shared memory (with the rings'
	 * cursors, a client's tell whether its port's connections are short;
	 * rec_add: one writer in practice, no locked instruction) */
	_Atomic uint64_t shm_calls;
	uint32_t fork_gen;      /* forks we had made when it went to shared memory */
	uint32_t inherits;      /* listening: forks whose child got a board entry at once */
	pid_t parent;           /* in a fork child: the parent (owner_gone) */
	struct sc_addr16 local; /* its local address (as the entry names it) */
	struct sc_addr16 remote;        /* ... and its peer's (a declined connection,
					 * or an accepted one classified) */
	/* accepted: its SYN as classified at accept() (the kernel hands a
	 * saved SYN out once), addresses in local and remote */
	struct {
		bool known, marked;
		uint8_t ttl;
		uint16_t lport, cport;
	} syn;
	pid_t owner;            /* the process whose shared-memory state it is */
	uint64_t owner_id;      /* ... its identity (a child asks it to switch
				 * through its rendezvous socket), once on
				 * shared memory */
	struct sc_conn *c;      /* M_SHM */
	/* M_LISTEN, and the sockets that used the board: held (sock_board) */
	struct sc_board *board;
	uint16_t bport;
	uint64_t ino;
	/* M_PENDING: the client side of an offer */
	uint64_t tag;
	int offer;
	uint64_t deadline_ns;
	struct sc_addr16 dst;   /* where it connected (its listener's liveness) */
	char *pbuf;
	size_t plen;
	uint32_t early;         /* of pbuf, published with the offer (board;
				 * a lead byte counted) */
	/* the port's listener defers its accepts (TCP_DEFER_ACCEPT): the
	 * first byte of our stream goes on TCP (pending_lead) */
	uint8_t lead;           /* LEAD_NO, LEAD_WANT (not decided), LEAD_ON */
	bool lead_tcp;          /* ... pbuf[0] was sent on TCP */
	bool lead_held;         /* ... held back there (MSG_MORE, cork) */
	int efd;                /* readable once the OPEN arrived */
	bool efd_set;           /* ... and written (under interp.rdv_lock) */
	bool tcp_up;            /* the kernel's connect has completed (pending_tcp_up) */
	uint32_t pnospace;      /* sends the buffer could not take all of (reg_edge) */
	bool efd_exposed;       /* ... handed to a poller or an epoll set (kept
				 * for the socket's life: they may still name it) */
	struct sc_conn *_Atomic attached;
	struct sc_sock *pnext;  /* pending list */
	struct sc_conn_rec *rec;        /* `shortcut stat` record, or NULL */
	/* its registrations in epoll sets made while it was fresh, which the
	 * kernel's sets hold (epoll_ctl.c: they follow it once it connects);
	 * written under kreg_lock, read without as a hint */
	struct sc_epreg *_Atomic kregs;
	/* device memory (devmem.c) */
	struct sc_dm_rx *dmrx;  /* fragments handed out, once it received with devmem */
	bool zerocopy;          /* SO_ZEROCOPY */
	uint32_t zc_next;       /* the next zerocopy send's id */
	int nzc;                /* completion ranges queued (s->lock) */
	struct sc_zc_range {
		uint32_t lo, hi;
		uint8_t code;
	} zc[SC_ZC_RANGES];
};

/* ---- routing: where a call on a socket goes ------------------------------ */

/* The connection an OPEN brought a pending client (NULL: none yet): set by
 * a compare-exchange in rdv_deliver (pending.c, under interp.rdv_lock) before
 * its eventfd wake-up, taken by an exchange.  seq_cst, as it always was
 * (release/acquire would publish the connection; the loads are plain moves
 * on x86-64 either way). */
static inline struct sc_conn *sock_attached(struct sc_sock *s)
{
	return atomic_load_explicit(&s->attached, memory_order_seq_cst);
}

/* A socket's mode (M_*).  sock_mode is an acquire load: it pairs with
 * sock_set_mode's release store, so that what the mode names (the
 * connection, the board, the pending offer, the owner) is visible.
 * sock_mode_hint is relaxed: for a test made again under s->lock, or one
 * that only picks a fast path.  The mode changes under s->lock. */
static inline int sock_mode(struct sc_sock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_acquire);
}

static inline int sock_mode_hint(struct sc_sock *s)
{
	return atomic_load_explicit(&s->mode, memory_order_relaxed);
}

/* How many sockets of the table are in a mode beyond M_TCP and M_LISTEN
 * (on their way to shared memory, or there).  None: a fork has nothing of
 * the table to mark or remember (fork.c) and takes no lock for it, whose
 * page the fork write-protected (a forking server of plain clients took a
 * copy-on-write fault per fork for it).  seq_cst: pairs with fork's load. */
extern _Atomic int socks_beyond;

static inline bool mode_beyond(int mode)
{
	return mode != M_TCP && mode != M_LISTEN;
}

static inline void socks_beyond_add(int n)
{
	atomic_fetch_add_explicit(&socks_beyond, n, memory_order_seq_cst);
}

static inline void sock_set_mode(struct sc_sock *s, int mode)
{
	int was = atomic_exchange_explicit(&s->mode, mode, memory_order_acq_rel);
	if (mode_beyond(was) != mode_beyond(mode))
		socks_beyond_add(mode_beyond(mode) ? 1 : -1);
}

/* Its shared-memory state is this process's (not a parent's or a child's,
 * across fork: they share the socket, one of them owns the connection). */
static inline bool sock_ours(const struct sc_sock *s)
{
	return s->owner == sc__pid();
}

/* Where a call on a socket goes. */
enum sc_route {
	RT_TCP,         /* the kernel's socket: a TCP connection, or none yet */
	RT_LISTEN,      /* a listener on the board */
	RT_SETTLING,    /* accepted, not claimed yet (sock_where only) */
	RT_PENDING,     /* a client whose offer is not answered yet */
	RT_SHM,         /* on shared memory, ours */
	RT_INHERITED,   /* on shared memory, another process's (fork) */
};

/* Where a call on s goes now, from one read of its mode. */
static inline enum sc_route sock_where(struct sc_sock *s)
{
	switch (sock_mode(s)) {
	case M_LISTEN:
		return RT_LISTEN;
	case M_SPENDING:
		return RT_SETTLING;
	case M_PENDING:
		return RT_PENDING;
	case M_SHM:
		return sock_ours(s) ? RT_SHM : RT_INHERITED;
	default:
		return RT_TCP;
	}
}

/* The routing step of every call that uses a connection: one accepted but
 * not claimed yet is claimed (or made TCP) first, in this process
 * (handshake.c: server_settle); then as sock_where.  Never RT_SETTLING. */
enum sc_route sock_route(int fd, struct sc_sock *s);

/* Its bytes may be elsewhere than on the kernel's socket: on shared
 * memory, in a pending client's buffer, or not decided yet. */
static inline bool route_off_kernel(enum sc_route r)
{
	return r == RT_SETTLING || r == RT_PENDING || r == RT_SHM || r == RT_INHERITED;
}

/* Not connected yet, and may still connect (on shared memory or not):
 * connect() decides its mode. */
static inline bool sock_fresh(struct sc_sock *s)
{
	return sock_mode(s) == M_TCP && !s->counted && !s->passive;
}

/* fd -> socket: pages of 4096 pointers, allocated on demand; written
 * under table_lock, read without */
#define PAGE_BITS 12
#define NPAGES 256
extern pthread_mutex_t table_lock;
extern struct sc_sock *_Atomic *_Atomic pages[NPAGES];
/* 1 + the highest fd the table ever named a socket for: a walk of the
 * table stops there (a forking server, whose fds are a few, walked 4,096
 * entries three times per fork, and its child twice) */
extern _Atomic int tab_end;

/* Where a walk of the table ends (tab_end_get, once per walk), and how
 * many entries of page p it visits: fd (p << PAGE_BITS) | i below end. */
static inline int tab_end_get(void)
{
	/* acquire: pairs with the release in sock_set */
	return atomic_load_explicit(&tab_end, memory_order_acquire);
}

static inline int tab_in_page(int end, int p)
{
	int e = end - (p << PAGE_BITS);
	return e > (1 << PAGE_BITS) ? (1 << PAGE_BITS) : e < 0 ? 0 : e;
}

static inline struct sc_sock *sock_get(int fd)
{
	if ((unsigned)fd >= (NPAGES << PAGE_BITS))
		return NULL;
	struct sc_sock *_Atomic *p = atomic_load_explicit(&pages[fd >> PAGE_BITS],
							 memory_order_acquire);
	return p ? atomic_load_explicit(&p[fd & ((1 << PAGE_BITS) - 1)], memory_order_acquire)
		 : NULL;
}

/* A record's byte counter (one writer in practice; a racing thread costs
 * a count). */
static inline void rec_add(_Atomic uint64_t *ctr, ssize_t n)
{
	if (n > 0)
		atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) +
				      (uint64_t)n, memory_order_relaxed);
}

void rec_fill(struct sc_sock *s, int fd, uint32_t mode, int reason, int32_t peer_pid);
void fallback_stat(struct sc_sock *s, int fd, enum sc_fallback why);
/* shortconn.c: true when this connection to port stays on TCP (short
 * connections learnt there); what a client's connection carried, at its close */
bool short_skip(uint16_t port);
bool tw_room(const struct sc_addr16 *dst);
bool tw_reusable(const struct sc_addr16 *dst);
void tw_spent(void);
void short_learn(uint16_t port, uint64_t calls, uint64_t bytes, uint64_t peer);
struct sc_sock *sock_new(int fd, int mode, bool nonblock);
void sock_release(struct sc_sock *s, int fd_of_release);
void sock_board(struct sc_sock *s, struct sc_board *b, uint16_t port);
/* fd no longer names its socket: replaced (fd_forget) or being closed
 * (fd_drop with closing: the socket's last fd closes the connection) */
void fd_forget(int fd);
void fd_drop(int fd, bool closing);
void fd_alias(int oldfd, int newfd);
bool in_vfork_child(void);

/* go.c: a dynamically linked Go program's system-call funnel patched to
 * come here (at start-up, before any Go code runs; SHORTCUT_GO) */
void go_start(void);

/* ---- set-up (pending.c, connect.c, handshake.c) -------------------------- */

void pending_unlink(struct sc_sock *s);
/* a pending client's eventfd: a spare one (reset) or a new one; -errno */
int pending_efd(void);
void pending_atfork_child(void);
int pending_settle(int fd, struct sc_sock *s, bool block, int max_ms);
/* s->lead: no lead byte (the port's listeners do not defer their accepts,
 * or it was decided), one to send with the first bytes, one committed
 * (the acceptor takes it from TCP, ahead of the early bytes) */
enum { LEAD_NO, LEAD_WANT, LEAD_ON };
/* A pending client's first bytes were buffered (s->lock held; nothing
 * unless s->lead is LEAD_WANT): the first goes on TCP, where a listener
 * that defers its accepts sees it, held back there if the send was (held:
 * MSG_MORE or cork), and the rest with the offer. */
void pending_lead(int fd, struct sc_sock *s, bool held);
/* The hold of a pending client's stream ends (a send not held back,
 * shutdown, close): a lead byte the kernel holds goes now, as the
 * kernel's push would send the program's bytes (s->lock held). */
void pending_push(int fd, struct sc_sock *s);
bool pending_tcp_up(int fd, struct sc_sock *s);
int rdv_ensure(void);
/* Room for a connection's fds below RLIMIT_NOFILE (connect.c) */
bool fd_headroom(int fd);
void server_settle(int fd, struct sc_sock *s);
extern _Atomic uint32_t nforks;        /* fork()s this process made (fork.c) */

/* ---- data (data.c, splice.c) ---------------------------------------------- */

/* A pipe end of the program's that splice (or sendfile) moves bytes
 * through, to or from an accelerated socket (splice.c). */
/* fd numbers closed or bound again by the calls we see (close, dup2, dup3,
 * close_range, closefrom): what a cache by fd number checks (splice.c) */
extern _Atomic uint32_t fd_rebinds;
extern _Atomic bool fd_rebinds_on;      /* counted from the first cache on */

struct pipe_io {
	int fd;
	bool nonblock;          /* O_NONBLOCK of its open file description */
	bool packet;            /* O_DIRECT: a read shorter than a packet drops
				 * the packet's rest */
	bool dry;               /* it had nothing to read at the last look */
	bool full;              /* it had no room at the last look */
	int tmp[2];             /* a pipe of ours (pipe_tmp), or -1 */
};

/* What a data call moves: the program's buffers, or (pipe) len bytes of a
 * pipe's (splice, sendfile into a pipe). */
struct xfer {
	const struct iovec *iov;
	int iovcnt;
	struct pipe_io *pipe;
	size_t len;             /* bytes asked for */
	unsigned int sflags;    /* the splice's flags (its TCP path) */
};

typedef ssize_t (*tcp_fn)(int fd, const struct iovec *iov, int iovcnt, int flags);
/* The send and the receive family's one path (data.c): route, then the
 * pending buffer, shared memory or TCP (tcp: the call the program made,
 * for the kernel's socket).  -1 and errno, as the shims return. */
ssize_t do_send(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp);
ssize_t do_recv(int fd, struct sc_sock *s, const struct xfer *x, int flags, tcp_fn tcp);
/* On TCP: send or recvfrom for one buffer, else sendmsg or recvmsg */
ssize_t tcp_sendv(int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t tcp_recvv(int fd, const struct iovec *iov, int iovcnt, int flags);
/* Bytes a connection of ours moved over TCP (its counters, its record). */
void tcp_count(struct sc_sock *s, bool tx, ssize_t n);
/* A pipe's bytes, never waiting (splice.c): the send path's reader (0:
 * dry) and the receive path's writer; what the first send to a closed
 * peer takes of it. */
ssize_t pipe_read_now(void *arg, const struct iovec *v, int n);
ssize_t pipe_write_now(void *arg, const struct iovec *v, int n);
size_t pipe_discard(struct pipe_io *p, size_t len);


int64_t rx_avail(struct sc_conn *c);
int64_t lowat_target(struct sc_sock *s, size_t len);
/* A connection bound to an epoll set's channel: a poller sleeping on that
 * channel's fd can lose its wake-up to the set's own waiter, which resets
 * the fd when it wakes (the datagram is gone before the poller looks).  So
 * such a poller looks again every SHARED_SLICE_MS. */
#define SHARED_SLICE_MS 5
/* A pending client's offer may be declined after its claim, which wakes
 * nobody (the acceptor only writes the board; the program may be waiting
 * for an answer to bytes still in our buffer): a poller or an epoll set
 * watching it looks at the board again after 1 ms, then after twice as
 * long each time up to PENDING_SLICE_MS (a blocked receive looks every
 * 20 ms: pending_settle), until it settles. */
#define PENDING_SLICE_MS 20
static inline int pending_slice_next(int ms)
{
	return ms * 2 < PENDING_SLICE_MS ? ms * 2 : PENDING_SLICE_MS;
}
bool on_shared_chan(struct sc_sock *s);
bool switching(struct sc_conn *c);

/* the send family's common path (zerocopy sends come through here too) */
ssize_t sock_sendv(int fd, struct sc_sock *s, const struct iovec *iov, int iovcnt, int flags);

/* ---- device memory (devmem.c, netlink.c) ------------------------------------ */

/* each: the result, -errno, or NOT_MINE (the usual path) */
ssize_t dm_recvmsg(int fd, struct sc_sock *s, struct msghdr *m, int flags);
int dm_dontneed(struct sc_sock *s, const void *val, socklen_t len);
ssize_t dm_sendmsg(int fd, struct sc_sock *s, const struct msghdr *m, int flags);
ssize_t dm_errqueue(int fd, struct sc_sock *s, struct msghdr *m);
bool dm_errqueue_pending(struct sc_sock *s);
/* netlink.c: generic netlink sockets (bind-rx / bind-tx of loopback) */
extern _Atomic int nl_count;
void nl_track(int fd);
void nl_close(int fd);
bool nl_tracked(int fd);
void nl_atfork_child(void);
ssize_t nl_sendmsg(int fd, const struct msghdr *m, int flags);     /* or NOT_MINE */
ssize_t nl_recvmsg(int fd, struct msghdr *m, int flags);           /* or NOT_MINE */
/* a netlink fd of the program's, to look at (cheap when there is none) */
static inline bool nl_fd(int fd)
{
	return atomic_load_explicit(&nl_count, memory_order_relaxed) && nl_tracked(fd);
}
void dm_sock_release(struct sc_sock *s);

/* ---- back to TCP (switch.c) ------------------------------------------------ */

#define SW_WAIT_NS      (5ull * 1000000000u)    /* for the peer to freeze */
#define SW_SEND_MS      30000                   /* to re-send on TCP */
#define SW_EXIT_MS      5000                    /* exit waits for switches under way */

int sock_switch(int fd, struct sc_sock *s);
int sock_switch_bounded(int fd, struct sc_sock *s, uint64_t wait_ns, int resend_ms);
uint64_t sw_resend(int fd, struct sc_conn *c, uint64_t from, uint64_t to, int max_ms);
void tcp_gate_wait(struct sc_sock *s);
/* Before a send on TCP: a switch's re-send first (a connection of ours
 * switched back to TCP); nothing to wait for on one that never was ours. */
static inline void tcp_gate(struct sc_sock *s)
{
	if (s && s->c && atomic_load_explicit(&s->resending, memory_order_acquire))
		tcp_gate_wait(s);
}
bool sw_orphan(int fd, struct sc_sock *s);
void sw_scan(bool all, bool cloexec_too, bool block);
bool off_file(void);
void sw_start(void);
void sw_kick(void);
void sw_ask(struct sc_conn *c);
void sw_rights(const struct msghdr *m);
void listener_withdraw(struct sc_sock *s);
int hidden_in(unsigned first, unsigned last, int *out, int max);
void sw_atfork_child(void);

/* ---- a client's passive close (linger.c) ------------------------------------ */

bool linger_take(int fd, struct sc_conn *c, bool reusable);
void lg_gave_up(bool reusable);
void linger_reap(void);
bool linger_tick(void);
void linger_exit(void);
int linger_in(unsigned first, unsigned last, int *out, int max);
void linger_atfork_child(void);
bool linger_fork_begin(void);
void linger_fork_end(bool locked);

/* ---- processes (fork.c, exec.c) ---------------------------------------------- */

bool child_may_hold(uint32_t gen);
int sw_request_owner_for(int fd, struct sc_sock *s, uint32_t why, uint64_t wait_ns);
static inline int sw_request_owner(int fd, struct sc_sock *s)
{
	return sw_request_owner_for(fd, s, SC_SWREQ_USE, 30000000000ull);
}
void sw_hook(struct sc_conn *c);
void settle_now(int fd, struct sc_sock *s);
void atfork_prepare(void);
void atfork_child(void);
void fds_each(void (*fn)(int fd, struct sc_sock *s, bool vforked), bool vforked);
void exec_prepare(bool spawn);

/* ---- readiness (poll.c, epoll_*.c) -------------------------------------------- */

short sock_revents(int fd, struct sc_sock *s, short want, int *waitfd, bool arm);

struct sc_ep;
struct sc_ep *ep_of(int fd);
void ep_close(int epfd);
void ep_close_range(unsigned first, unsigned last);
void ep_dup(int oldfd, int newfd);
void ep_mark_shared(void);
void ep_atfork_child(void);
void ep_switched(struct sc_sock *s, bool child_set);
void ep_forget_sock(struct sc_sock *s);
void ep_kregs_follow(struct sc_sock *s);
void ep_expose_fd(int fd);
void ep_refresh_exposed(void);
extern _Atomic int nexp_sig;    /* exposed sets we hold readable (ep_expose) */

#endif
