/* SPDX-License-Identifier: MIT */
/*
 * shortcut — TCP-like byte streams between processes on one host, through
 * shared memory.
 *
 * Every function returns 0 or a non-negative count on success and -errno on
 * failure; errno itself is never touched.  Objects are opaque.
 *
 * A *listener* is a Unix-domain rendezvous socket.  A process that connects
 * to it opens a *link group* with the listening process: one memfd segment,
 * mapped by both, with slots for up to SHORTCUT_MAX_CONNS connections.  Later
 * connections between the same two processes reuse the group (no new
 * mapping, one message on the group's socket); a full group starts a new one.
 *
 * A connection is two single-producer single-consumer byte rings (one per
 * direction) in the shared segment.  send copies from the caller's buffer
 * straight into the peer's ring; recv copies out of it: one copy end to end.
 * A busy stream makes no system calls; a side that must wait sleeps on a
 * futex (or, when polled, its channel's fd) after announcing it, and the
 * other side makes a wake-up call only when it was announced.
 *
 * Thread safety: one thread may send while another receives on the same
 * connection; concurrent senders (or receivers) are serialised.  Distinct
 * connections are independent.
 */
#ifndef SHORTCUT_H
#define SHORTCUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sc_listener;
struct sc_conn;
struct sc_chan;

/* Flags for sc_connect/sc_accept/sc_send/sc_recv (may be or-ed). */
#define SC_NONBLOCK  0x01   /* operation (or, at creation, the connection) never sleeps: -EAGAIN */
#define SC_WAITALL   0x02   /* recv: wait for the full length (stops early at EOF/error) */
#define SC_PEEK      0x04   /* recv: return data without consuming it */
#define SC_MORE      0x08   /* send: more follows; do not wake the peer yet (like MSG_MORE) */

/* Events reported by sc_conn_events / sc_chan_wait (same values as poll.h). */
#define SC_EV_IN     0x001  /* data to read, or end of stream */
#define SC_EV_OUT    0x004  /* space to write */
#define SC_EV_ERR    0x008  /* connection aborted (reset, protocol violation) */
#define SC_EV_HUP    0x010  /* both directions finished */
#define SC_EV_RDHUP  0x2000 /* peer finished writing */

/* ---- rendezvous ------------------------------------------------------- */

/*
 * Listen on a Unix-domain path (a leading '@' means the abstract namespace).
 * An existing socket file at that path is replaced.  backlog bounds the
 * connections waiting for sc_accept (0 = default 128).
 */
int sc_listen(const char *path, int backlog, struct sc_listener **out);

/* Accept one connection; flags: SC_NONBLOCK (returns -EAGAIN when none). */
int sc_accept(struct sc_listener *l, struct sc_conn **out, int flags);

/* A file descriptor that polls readable while sc_accept may succeed. */
int sc_listener_fd(const struct sc_listener *l);

/* Stop listening; connections already accepted are unaffected. */
void sc_listener_close(struct sc_listener *l);

/*
 * Connect to a listener.  Returns at once: the peer need not have accepted
 * yet, and data sent before it does waits in the ring.  -ECONNREFUSED if
 * nobody listens at path, -EAGAIN if the listening process is not draining
 * its control socket (stopped, or flooded); a connection the listener
 * refuses later (backlog full) fails on its next operation with
 * -ECONNREFUSED.
 * flags: SC_NONBLOCK makes later operations nonblocking by default.
 */
int sc_connect(const char *path, struct sc_conn **out, int flags);

/* ---- data ------------------------------------------------------------- */

/*
 * Send up to len bytes.  Blocking: returns when all bytes are in the ring (or
 * an error occurs after a partial send: the partial count wins).
 * Nonblocking: returns what fit, or -EAGAIN if nothing did.
 * -EPIPE after shutdown(SHUT_WR) or once the peer closed its receive side,
 * -ECONNRESET after an abort, -EPROTO after a peer protocol violation.
 * No signal is ever raised.  A blocking call interrupted by a signal handler
 * installed without SA_RESTART returns -EINTR (or the partial count), as
 * send(2) does; with SA_RESTART it goes on waiting.
 */
ssize_t sc_send(struct sc_conn *c, const void *buf, size_t len, int flags);
ssize_t sc_sendv(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags);

/*
 * Receive up to len bytes.  Returns 0 at end of stream, -EAGAIN when
 * nonblocking and nothing is there, -ECONNRESET if the peer aborted (or
 * died), -EPROTO after a peer protocol violation, -EINTR as sc_send.
 */
ssize_t sc_recv(struct sc_conn *c, void *buf, size_t len, int flags);
ssize_t sc_recvv(struct sc_conn *c, const struct iovec *iov, int iovcnt, int flags);

/* Flush bytes held back by SC_MORE / corking: wake the peer if it waits. */
int sc_flush(struct sc_conn *c);

/* SHUT_RD, SHUT_WR or SHUT_RDWR (sys/socket.h values). */
int sc_shutdown(struct sc_conn *c, int how);

/*
 * Close and free the connection.  If received data was left unread (or
 * linger_zero is set with sc_set_linger0) the peer sees -ECONNRESET, as with
 * TCP; otherwise it sees end of stream after the data already sent.
 */
int sc_close(struct sc_conn *c);

/*
 * Buffer sizes as a program set them (SO_SNDBUF, SO_RCVBUF: bytes; 0: not
 * set, -1: leave as is).  When our send buffer is set, the bytes in flight
 * from us to the peer are bounded by it plus the peer's receive buffer (or
 * 64 KiB if the peer set none), at least 4096 and at most the ring: the
 * back-pressure a kernel TCP sender feels.  Otherwise the ring bounds them,
 * as the kernel's autotuned send buffer would.
 */
void sc_set_bufs(struct sc_conn *c, int sndbuf, int rcvbuf);

/*
 * Cork (TCP_CORK): while on, every send holds the peer's wake-up back as
 * SC_MORE does; turning it off wakes the peer for what is held.  A held
 * wake-up is delivered after at most 200 ms in any case, as the kernel sends
 * corked bytes then.
 */
void sc_set_cork(struct sc_conn *c, int on);

/* Make sc_close abort the connection (SO_LINGER {1, 0}). */
void sc_set_linger0(struct sc_conn *c, int on);

/* Default blocking mode of a connection (SC_NONBLOCK flag on every call). */
void sc_set_nonblock(struct sc_conn *c, int on);

/* ---- readiness -------------------------------------------------------- */

/*
 * A file descriptor that polls readable when something may have changed on
 * the connection (data, space, end of stream, error): then call the
 * nonblocking operations, or sc_conn_events.  It is the fd of the
 * connection's completion channel.
 */
int sc_conn_fd(struct sc_conn *c);

/* Current SC_EV_* state of a connection (level, not edge). */
int sc_conn_events(struct sc_conn *c);

/*
 * Completion channels: one pollable fd and a ready set for many connections.
 * Bind connections with sc_chan_bind; sc_chan_wait reports those that became
 * ready since they were last reported, with one wake-up for all of them.
 * A channel is one waiting context: use it from one thread at a time.
 */
int sc_chan_open(struct sc_chan **out);
int sc_chan_fd(const struct sc_chan *ch);
void sc_chan_close(struct sc_chan *ch);   /* connections bound to it move back to their own */

/* Bind c to ch (NULL: back to the connection's own channel). */
int sc_chan_bind(struct sc_conn *c, struct sc_chan *ch);

/*
 * Wait up to timeout_ms (-1 forever, 0 poll) for bound connections that may
 * have changed state; store at most n of them in out and return the count
 * (0 on timeout), each once (a call that fills out may name one again that
 * changed again meanwhile).  A connection is reported again only after its
 * next change of state.  Cost: O(reported + link groups), not O(bound).
 * On return with fewer than n, the channel is armed: its fd (sc_chan_fd)
 * signals the next change; with n, more may be waiting: call again.
 */
int sc_chan_wait(struct sc_chan *ch, struct sc_conn **out, int n, int timeout_ms);

/* Opaque user pointer carried by a connection (for sc_chan_wait users). */
void sc_conn_set_user(struct sc_conn *c, void *user);
void *sc_conn_user(const struct sc_conn *c);

/* ---- introspection ---------------------------------------------------- */

struct sc_conn_info {
	uint64_t conn_id;        /* group id << 8 | slot */
	uint32_t slot;
	uint32_t side;           /* 0 = connecting side, 1 = accepting side */
	uint32_t rx_ring_size, tx_ring_size;
	uint64_t rx_prod, rx_cons;   /* receive ring cursors (bytes ever) */
	uint64_t tx_prod, tx_cons;   /* send ring cursors (tx_cons as last seen) */
	uint64_t bytes_sent, bytes_received;
	uint64_t wakeups_sent;       /* wake-up system calls made for this connection */
	uint64_t sleeps;             /* times a call on it slept */
	int32_t  peer_pid;
	int32_t  state;              /* SC_EV_* mask as sc_conn_events */
};
int sc_conn_info(struct sc_conn *c, struct sc_conn_info *info);

/* Process-wide counters (monotonic since the library loaded). */
struct sc_stats {
	uint64_t conns_opened;       /* connections established (both sides) */
	uint64_t conns_closed;
	uint64_t conns_aborted;      /* reset by either side or by peer death */
	uint64_t conns_refused;
	uint64_t proto_errors;       /* peer protocol violations (EPROTO) */
	uint64_t groups_created;     /* link groups this process created */
	uint64_t groups_joined;      /* link groups accepted from a peer */
	uint64_t bytes_sent, bytes_received;
	uint64_t wakeups_sent;       /* wake-up system calls made for a peer */
	uint64_t sleeps;             /* waits that slept in the kernel */
	uint64_t spin_hits;          /* waits satisfied while spinning */
	/* interposer (LD_PRELOAD) only */
	uint64_t conns_accelerated;  /* TCP connections moved to shared memory */
	uint64_t conns_fallback;     /* TCP connections that stayed on TCP */
	uint64_t bytes_tcp_sent, bytes_tcp_received;  /* on those */
	uint64_t spins_crowded;      /* waits that slept at once: more runnable threads
	                              * on the machine than CPUs */
};
void sc_stats_get(struct sc_stats *st);

/* ---- device memory ------------------------------------------------------ */

/*
 * Bind a memory region (a memfd, or any file mmap can share; sealed with
 * F_SEAL_SHRINK as ncdevmem does) for receiving or for sending, as the
 * kernel's netdev netlink bind-rx / bind-tx do for loopback (which the
 * interposer also answers: docs/devmem.md).  Returns the binding id (> 0),
 * the dmabuf_id of the socket API's cmsgs, or -errno (EBADF, EINVAL: not
 * mappable or empty, EEXIST: an rx binding exists already, loopback having
 * one queue).  A connection of this process whose receiver reads with
 * MSG_SOCK_DEVMEM gets its payload in the rx region; sendmsg with
 * MSG_ZEROCOPY and an SCM_DEVMEM_DMABUF cmsg naming a tx binding sends from
 * its region (iov_base: offsets).  Unbinding lets no new connection use
 * the region; fragments the program holds stay valid until returned.  An
 * rx region not sealed against shrinking is not written by peers (they
 * could be made to fault): its connections receive linear bytes.
 */
int sc_devmem_bind_rx(int fd);
int sc_devmem_bind_tx(int fd);
int sc_devmem_unbind(unsigned int id);

/* ---- configuration ---------------------------------------------------- */

/*
 * Read and validate SHORTCUT_* variables (the library also does this on
 * first use).  Returns 0, or -EINVAL after printing one line naming the
 * variable and its allowed values to stderr.
 */
int sc_config_check(void);

#ifdef __cplusplus
}
#endif
#endif /* SHORTCUT_H */
