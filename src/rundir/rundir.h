/* SPDX-License-Identifier: MIT */
/*
 * The run directory (SHORTCUT_RUNDIR): where accelerated processes on one
 * host find each other.  It holds, per TCP port with an accelerated
 * listener, an offer board (a small shared file), each process's rendezvous
 * socket (p-PID.sock) and each process's counters (stats-PID-N).
 *
 * Offer board, per port: a header naming the live listeners of that port
 * (process, network namespace, addresses) and one offer entry per client
 * port.  A client that connects to an address a live listener serves marks
 * its SYN (a DSCP value, SC_SYN_TOS), connects, and writes its offer (the
 * destination address, its pid and a random tag) into the entry of the port
 * the kernel gave it.  Whichever process accept()s the connection reads the
 * SYN it saved (TCP_SAVE_SYN): marked, it waits briefly for the offer and
 * claims it (one compare-and-swap), then connects to the client's
 * rendezvous with the tag; unmarked (or in vain), it declines the entry for
 * that 4-tuple, so that a late offer finds the answer there.  Either the
 * claim or the decline wins the entry: both sides always agree.  No network
 * round trip is added, and a connection nobody claims stays plain TCP.
 */
#ifndef SC_RUNDIR_H
#define SC_RUNDIR_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "compat.h"
#include "lockorder.h"
#include "layout.h"
#include "stats.h"

#define SC_BOARD_MAGIC      0x5343424fu
/* 5: identities, not pids; the client's address and SYN tag; deferral;
 * 6: the quiet OPEN's word (with link-group layout 6: a process of an
 * older version does not find our listeners, nor we its, and their
 * connections stay on TCP, no_listener) */
#define SC_BOARD_VERSION    6u
#define SC_BOARD_LISTENERS  32
#define SC_BOARD_CONNECTING 32
#define SC_BOARD_ADDRS      8
#define SC_BOARD_OFFERS     65536       /* one entry per client port (sparse file) */

/* an IPv4 address is stored v4-mapped */
struct sc_addr16 {
	uint8_t b[16];
};

/*
 * A listener entry is live while its process holds an OFD lock on the
 * entry's first byte of the board file (F_OFD_SETLK on a description of its
 * own, close-on-exec): the lock goes with the description, so an entry dies
 * with its process however it ends (killed, a zombie not yet reaped), and
 * with an exec (the new image, with the library or without, does not know
 * the socket it inherited is ours).  A fork child that inherits a listening
 * socket: for the first forks after listen() (a server's workers) its parent
 * writes its entry at the fork (prereg: alive while the child is, until the
 * child locks it), so that a listener is never missing while the child
 * starts and the parent closes its copy; after those (a server forking per
 * connection, whose children only close it) the child has an entry of its
 * own once it accepts on it.
 */
struct sc_board_listener {
	_Atomic uint64_t owner;         /* its process's identity (procs.c); 0: free */
	uint64_t netns;                 /* network namespace inode */
	uint64_t sock_ino;              /* the listening socket's inode */
	_Atomic uint32_t naddr;         /* addresses below; 0 = not yet written
					 * (stored last, release: entry_write) */
	uint32_t wildcard;
	_Atomic uint32_t prereg;        /* written by the parent at fork for its
					 * child `kid`, until the child takes it
					 * over: owned by the parent, live while it
					 * is (no lock) */
	/* its socket defers its accepts (TCP_DEFER_ACCEPT > 0): the kernel
	 * queues a connection only once data came on it, so a client sends
	 * its first byte on TCP (a lead byte, struct sc_early); a hint */
	_Atomic uint32_t deferred;
	/* the pid its process has (prereg: the child's, as its parent sees
	 * it): parent and child, one PID namespace, find their entries by it;
	 * nothing is judged by it */
	int32_t kid;
	uint32_t pad2;
	struct sc_addr16 addr[SC_BOARD_ADDRS];  /* bound address, or all local
						  * addresses of a wildcard bind */
};

/* A client between its connect() and its offer: the accepting side waits
 * for a marked SYN's offer only while one is (an unmarked wait would let
 * anyone who can send a marked SYN stall the server). */
struct sc_board_connecting {
	/* low 32 bits: a token of its process's identity (0: free); high 32:
	 * CLOCK_MONOTONIC ms (low 32 bits) when taken.  One word, written by
	 * one compare-exchange: a reader never sees a taker's token with the
	 * time of the slot's previous use (or 0), which looked stale */
	_Atomic uint64_t word;
};

enum { SC_OFFER_FREE, SC_OFFER_BUSY, SC_OFFER_OFFERED, SC_OFFER_CLAIMED,
       SC_OFFER_DECLINED,
       SC_OFFER_WITHDRAWN      /* its client closed before a claim: free, and
				* the acceptor need not wait for an offer */
};

/* An offer's word: tag << 8 | state.  The tag (56 random bits, never 0)
 * makes every transition a compare-and-swap on this offer, not on whatever
 * offer reuses the entry later.  While an entry is being written (BUSY)
 * the tag is the writer's identity: whoever meets it judges the writer by
 * the word it took, never by the entry's writer, still its previous one's. */
#define SC_OFFER_WORD(tag, st)  ((uint64_t)(tag) << 8 | (st))
#define SC_TAG_MASK             ((1ull << 56) - 1)

/*
 * An offer names the whole connection as its client sees it: both
 * addresses, the client's port (the entry's index), its network namespace
 * and the tag its SYN carried (the TTL, or IPv6 hop limit, it left with).
 * The acceptor claims it only for a connection whose SYN shows the same
 * (two clients in two network namespaces with the same port, matched by
 * port and destination alone, would have their bytes swapped).
 */
struct sc_offer {
	_Atomic uint64_t word;
	uint16_t cport;                 /* client port, host order */
	uint8_t syn_ttl;                /* its SYN's TTL / hop limit (0: not tagged) */
	uint8_t pad0[5];
	struct sc_addr16 daddr;         /* destination address as the client sees it */
	struct sc_addr16 saddr;         /* the client's own address, as it sees it */
	uint64_t netns;                 /* writer's network namespace */
	_Atomic uint64_t writer;        /* writer's identity (the client; the server
					 * for a decline) */
	_Atomic uint64_t claimer;       /* identity of the process that claimed it */
	uint64_t time_ms;               /* CLOCK_MONOTONIC when written */
	uint64_t max_seg;               /* the client's room for a new link
					 * group's segment, bytes (0: no limit) */
	/* the client's word for a quiet OPEN (SC_QUIET_*, core's conn.h):
	 * 0 at its post, SPIN and its tag while it spins for its OPEN, then
	 * the slot's name if the claimer put it there */
	_Atomic uint64_t quiet;
	uint64_t pad[4];
};

/* The SYN mark of an accelerated client: DSCP 7 (TOS byte 0x1c), a code
 * point no standard assigns; restored to the program's value after connect. */
#define SC_SYN_TOS 0x1c
/* ... and its tag: the TTL (IPv6: hop limit) its SYN leaves with, a random
 * value from SC_SYN_TTL_MIN to 255, the program's own put back after
 * connect() as the DSCP is.  Loopback and a bridge or veth pair between
 * namespaces carry it unchanged; a route between them lowers it, and the
 * connection then stays on TCP (its addresses are not what the client
 * sees either). */
#define SC_SYN_TTL_MIN 128
_Static_assert(sizeof(struct sc_offer) == 128, "offer: two cache lines");

/* A client's first bytes, riding with its offer (as TCP Fast Open's ride
 * with the SYN): what it sends before the OPEN comes is put here too, so
 * that the acceptor finds the request in its ring as soon as it claims,
 * instead of waiting for the client to be woken by the OPEN and flush.
 * len: bytes published (the client appends, then moves len by a CAS); the
 * claimer seals it (SC_EARLY_SEALED) and takes data[0, len).
 *
 * SC_EARLY_LEAD: the client sends the first byte of its stream on TCP (its
 * port's listener defers its accepts: the kernel queues the connection
 * only once a byte came), and data[] holds the bytes after it (at most
 * SC_EARLY_MAX - 1).  The client sets it by a CAS of len from 0 before it
 * sends that byte; the claimer's seal fixes both at once: LEAD in the
 * sealed word means the byte is on the kernel socket or on its way, and
 * the claimer takes it from there ahead of data[]; no LEAD, the client
 * puts no byte on TCP. */
#define SC_EARLY_SEALED (1u << 31)
#define SC_EARLY_LEAD   (1u << 30)
struct sc_early {
	_Atomic uint32_t len;
	uint32_t pad;
	uint8_t data[SC_EARLY_MAX];
};
_Static_assert(sizeof(struct sc_early) == 256, "early bytes: four cache lines");

struct sc_board {
	_Atomic uint32_t magic;         /* set once (compare-exchange from 0) */
	uint32_t version, port, pad;
	struct sc_board_listener listeners[SC_BOARD_LISTENERS];
	struct sc_board_connecting connecting[SC_BOARD_CONNECTING];
	struct sc_offer offers[SC_BOARD_OFFERS] __attribute__((aligned(64)));
	struct sc_early early[SC_BOARD_OFFERS];        /* by client port, as offers */
};


/* The run directory's path as configured (SHORTCUT_RUNDIR, else
 * $XDG_RUNTIME_DIR/shortcut, else /dev/shm/shortcut-UID on a tmpfs, else
 * /tmp/shortcut-UID), nothing checked or created: 0, or -ENAMETOOLONG when
 * it has SC_RUNDIR_MAX bytes or more. */
#define SC_RUNDIR_MAX 80
int sc__rundir_choose(char *buf, size_t len);
/* The run directory, created (0700) on first use; NULL if unusable. */
const char *sc__rundir(void);
/* Why it is unusable, for a message: "PATH: reason; fix" (empty if usable). */
const char *sc__rundir_error(void);
/* The kill switch in the run directory (`shortcut off` creates it): while
 * it exists, processes accelerate nothing and switch live connections
 * back to TCP. */
#define SC_OFF_FILE "off"
/* Our network namespace's inode (0 if unknown). */
uint64_t sc__netns(void);

/* A file of the run directory may be used if it is ours (or, with a
 * shared group, SHORTCUT_GROUP, the group's); files are made with this mode. */
bool sc__rundir_file_ok(const struct stat *st);
mode_t sc__rundir_file_mode(void);
/* A file we just made (its size 0 when we opened it): its mode made the
 * group's too, with SHORTCUT_GROUP (the umask may have taken it away). */
void sc__rundir_file_made(int fd);

/* ---- processes: identity and liveness (procs.c) ----------------------
 *
 * A process is known across the run directory by its identity, never by
 * its pid (pids repeat across PID namespaces: every container's first
 * process is pid 1): 56 bits, the index of its slot in <rundir>/procs-v1
 * (low 16 bits) and a random generation.  It is alive while it holds a
 * record lock (F_SETLK) on its slot's first byte: the kernel drops it when
 * the process ends, however it ends, and at an exec, does not hand it to
 * a fork child, and answers the same in every namespace.
 */
#define SC_PROCS        65536
#define SC_PROCS_FILE   "procs-v1"
#define SC_PROC_ID_MASK ((1ull << 56) - 1)
struct sc_proc {
	_Atomic uint64_t id;            /* 0: unused (or being rewritten) */
	int32_t pid;                    /* in its own PID namespace: for people */
	uint32_t uid;
	uint64_t pidns, netns;          /* its namespaces' inodes */
	char comm[16];
	uint64_t pad[2];
};
_Static_assert(sizeof(struct sc_proc) == 64, "a process's slot: one cache line");
/* Our identity, made on first use (0: none can be had: no run directory,
 * or it is full; the caller stays on TCP). */
uint64_t sc__self(void);
/* Our identity if we have one already (0: none; none is made). */
uint64_t sc__self_peek(void);
/* Is the process of identity id alive? */
bool sc__proc_alive(uint64_t id);
/* A copy of process id's slot: 0, or -ESRCH (gone, or never was). */
int sc__proc_info(uint64_t id, struct sc_proc *out);
/* Our description of the processes' table, -1 if none (close_range
 * leaves it open: closing it would drop our identity's lock). */
int sc__procs_fd(void);
/* The live processes of the run directory (at most max; the tools). */
int sc__procs_live(struct sc_proc *out, int max);
/* In a fork child, first thing: the parent's identity is not ours (ours is
 * made when first needed). */
void sc__proc_atfork_child(void);

/* Address helpers (AF_INET / AF_INET6 only; false for anything else). */
bool sc__addr16(const struct sockaddr *sa, struct sc_addr16 *out, uint16_t *port);
bool sc__addr_is_loopback(const struct sc_addr16 *a);
bool sc__addr_is_any(const struct sc_addr16 *a);

/* Make [p, p + len) of a shared mapping of a run directory file backed
 * (MADV_POPULATE_WRITE) before it is first touched: on a full tmpfs a
 * store, or a load, in a hole raises SIGBUS.  0, or -ENOSPC. */
int sc__backed(void *p, size_t len);

/* Ports that ever had an accelerated listener (ports.c): a bit each in
 * <rundir>/ports-v5, set by a listener before it makes or writes its
 * board; clear, a client knows there is no board without opening it.
 * sc__port_listened is true where the map is unusable. */
#define SC_PORTS_FILE   "ports-v5"
void sc__port_mark(uint16_t port);
bool sc__port_listened(uint16_t port);

/* The board of a port, created if create, with a reference held on it
 * (sc__board_put gives it back).  A board stays mapped while held, and
 * then among the SC_BOARD_CACHE mapped (the least recently looked up goes
 * when another is mapped).  A look-up of a mapped board is a few atomics,
 * no system call; so is one of a port whose bit is clear (NULL).  create
 * sets the bit first. */
#define SC_BOARD_CACHE 64
struct sc_board *sc__board(uint16_t port, bool create);
void sc__board_put(uint16_t port);

/* A listener of ours on port (addr as bound; deferred: TCP_DEFER_ACCEPT
 * set): register / drop it.
 * -ESTALE: b is a board removed since it was mapped (sc__board_collect);
 * give it back, sc__board_forget(port, b), and take the port's again. */
int sc__board_listen(struct sc_board *b, const struct sc_addr16 *addr, uint64_t sock_ino,
		     bool deferred);
/* The listening socket sock_ino (every entry naming it: a fork child's
 * too) defers its accepts now, or no longer. */
void sc__board_defer(struct sc_board *b, uint64_t sock_ino, bool deferred);
/* Our reference on port's board b given back: drop the mapping if the
 * file is gone or another now (removed by a collection) and nobody else of
 * ours holds it; true if the caller should look the port's board up again
 * (dropped, or replaced meanwhile). */
bool sc__board_forget(uint16_t port, struct sc_board *b);
/* A client found no listener on port's mapped board: is the file another
 * now, or gone (one stat())? */
bool sc__board_recheck(uint16_t port);
/* The run directory's collection (sc__stats_collect, its flock held): the
 * board file name of port (dfd's entry) is removed if no live listener
 * has an entry on it (flock on it held, so that a listener registering
 * meanwhile either is seen or finds the file gone: -ESTALE above).
 * true if it was removed. */
bool sc__board_collect(int dfd, const char *name, uint16_t port);
void sc__board_unlisten(struct sc_board *b, uint64_t sock_ino);
/* After fork: the child (pid kid) holds the listening socket parent (an
 * identity) registered too.  Either side may call it first.  The parent
 * (in_child false) writes an entry for the child, its own and unlocked
 * (prereg: live while the parent is), unless the child has its own
 * already; the child takes that entry over (locked, its identity), or
 * writes one of its own. */
int sc__board_listen_inherit(struct sc_board *b, uint64_t sock_ino, uint64_t parent,
			     int32_t kid, bool in_child);
/* Does a live accelerated listener serve dst?  (client side) */
bool sc__board_serves(struct sc_board *b, const struct sc_addr16 *dst);
/* Does a listener for dst defer its accepts (any of them: which socket of
 * an SO_REUSEPORT group the kernel picks is not known)?  A hint: an entry
 * of a dead listener may count (a lead byte costs little). */
bool sc__board_defers(struct sc_board *b, const struct sc_addr16 *dst);
/* In a fork child, first thing: the parent's lock descriptions are not
 * ours (the parent's entries must die with the parent). */
void sc__board_atfork_child(void);

/* Client: a connecting slot taken before connect() (-1: none free), freed
 * once the offer is posted or given up. */
int sc__board_connecting(struct sc_board *b);
void sc__board_connected(struct sc_board *b, int slot);
/* Server: is a live client between its connect() and its offer? */
bool sc__board_anyone_connecting(struct sc_board *b);

/* Client, after connect: write our offer (tag: 56 bits, not 0) in our
 * port's entry: the connection as we see it (src: our address, dst: the
 * destination; syn_ttl: our SYN's tag).  Returns its index, -ECONNREFUSED
 * if the accepting side already declined this connection, -EBUSY if
 * another live offer holds it, -ENOSPC if its page cannot be allocated
 * (the run directory is full), -ESRCH if we have no identity. */
int sc__offer_post(struct sc_board *b, uint16_t cport, const struct sc_addr16 *src,
		   const struct sc_addr16 *dst, uint8_t syn_ttl, uint64_t tag, uint64_t max_seg);
/* Server, after a claim: the largest segment of a new link group the
 * client said it can map (0: no limit). */
uint64_t sc__offer_max_seg(struct sc_board *b, int idx);
/* Client, our offer posted and not claimed yet: publish len more bytes of
 * our stream, which has had `at` bytes published so far in data[] (a lead
 * byte not counted).  Returns how many were (0 once the offer is claimed,
 * or full). */
size_t sc__offer_early(struct sc_board *b, int idx, uint64_t tag, uint32_t at,
		       const void *buf, size_t len);
/* Client, our offer posted, nothing published yet: commit the first byte
 * of our stream to TCP (SC_EARLY_LEAD).  true: committed, send it now;
 * false: the offer is claimed or declined already (its claimer sealed
 * it): no byte of ours may go on TCP before the answer. */
bool sc__offer_lead(struct sc_board *b, int idx, uint64_t tag);
/* Client: our offer's state: OFFERED, DECLINED, or CLAIMED (claimed, or
 * claimed and already done with: the OPEN is on its way). */
uint32_t sc__offer_state(struct sc_board *b, int idx, uint64_t tag);
/* Client: the identity of the process that claimed our offer, while it
 * is claimed and not done with (its OPEN may not be sent yet); 0
 * otherwise. */
uint64_t sc__offer_claimer(struct sc_board *b, int idx, uint64_t tag);
/* The same as a hint, also once the claimer is done with it (the OPEN
 * sent): the last process that claimed entry idx (0: none).  Another
 * namespace's later offer on the port may have changed it. */
uint64_t sc__offer_claimer_hint(struct sc_board *b, int idx);
/* Does process pid of our own PID namespace exist (kill(pid, 0); a zombie
 * does)?  Is it alive (a zombie is not)?  Only for a process we know is
 * of our namespace (our parent, our child, an older version's files);
 * anything another process wrote is judged by identity (sc__proc_alive). */
bool sc__pid_exists(int32_t pid);
bool sc__pid_alive(int32_t pid);
/* Client: withdraw our offer if nobody claimed it (OFFERED or DECLINED →
 * FREE).  true: withdrawn, nobody will claim it; false: claimed. */
bool sc__offer_withdraw(struct sc_board *b, int idx, uint64_t tag);

/* Server, before it looks at cport's entry: 0, or -ENOSPC if the entry's
 * page cannot be allocated (sc__backed; the client could not post there).
 * sc__early_backed: the same for its early bytes, before a claim takes
 * them (a plain client's connection never meets that page). */
int sc__offer_backed(struct sc_board *b, uint16_t cport);
/* offer.c: forget what was seen backed of port's board (it is mapped
 * anew: the file may have been replaced); board.c: the boards' clock
 * (CLOCK_MONOTONIC_COARSE, ms), in offers' and connecting slots' times */
void sc__offers_backed_forget(uint16_t port);
uint64_t sc__board_ms(void);
int sc__early_backed(struct sc_board *b, uint16_t cport);
/* Server: claim the offer for a connection we accepted; returns its index
 * (state CLAIMED, pid and tag copied out) or -1 (none yet). */
/* Did the client of this connection (cport, our local address, the
 * client's as we see it) close before its offer was claimed? */
bool sc__offer_withdrawn(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
			 const struct sc_addr16 *remote);
/* ... is an offer for it on the board (as sc__offer_claim would find it,
 * an unmarked SYN's: no tag compared)?  A look, nothing written. */
bool sc__offer_named(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
		     const struct sc_addr16 *remote);
/* ... claim the offer for it, if one names it: the client's addresses as
 * we see them, its network namespace if loopback, and syn_ttl, its SYN's
 * tag (0: an unmarked SYN, sent again after the client posted: not
 * compared).  Returns the entry's index (CLAIMED; the client's identity
 * and the tag copied out), or -1. */
int sc__offer_claim(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
		    const struct sc_addr16 *remote, uint8_t syn_ttl, uint64_t *client,
		    uint64_t *tag);
/* Server, right after a claim: seal the client's early bytes (it publishes
 * no more) and return them (*len ≤ SC_EARLY_MAX - *lead; stable in the
 * board until the client's next offer on that port, after this
 * connection).  *lead: the client's first byte is on TCP, ahead of them. */
const uint8_t *sc__offer_early_take(struct sc_board *b, int idx, uint32_t *len, bool *lead);
/* Server: no offer for this connection: decline the 4-tuple so that a late
 * offer learns it.  0 = declined (index in *idx, or -1 if another live
 * offer holds the entry, or a live writer has held it BUSY for 20 ms),
 * -EAGAIN = an offer for it just arrived: claim. */
int sc__offer_decline_tuple(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
			    const struct sc_addr16 *remote, int *idx);
/* Server, closing a connection it declined: free the entry if still ours. */
void sc__offer_undecline(struct sc_board *b, int idx, const struct sc_addr16 *local,
			 const struct sc_addr16 *remote);
/* Server, after a claim: the OPEN was sent (entry freed), or it could not
 * be (the client learns it and stays on TCP). */
void sc__offer_done(struct sc_board *b, int idx);
/* The word of offer idx for a quiet OPEN (conn.h) */
_Atomic uint64_t *sc__offer_quiet(struct sc_board *b, int idx);
/* The client took up its quiet OPEN: its claimed entry (tag) free again. */
void sc__offer_opened(struct sc_board *b, int idx, uint64_t tag);
void sc__offer_decline(struct sc_board *b, int idx, uint64_t tag);

/* Path of the rendezvous socket of the process of identity id:
 * <rundir>/p-IDENT.sock (14 hex digits). */
int sc__rendezvous_path(uint64_t id, char *buf, size_t len);

/* A process's stats file: <rundir>/stats-IDENT (its identity, 14 hex digits). */
/* One live TCP connection of the process, for `shortcut stat`. */
enum { SC_REC_FREE, SC_REC_TCP, SC_REC_PENDING, SC_REC_SHM };
struct sc_conn_rec {
	_Atomic uint32_t mode;          /* SC_REC_*; FREE: unused */
	int32_t fd;
	int32_t peer_pid;               /* shared memory: the peer process's pid, as
					 * SO_PEERCRED gives it here (0: not seen
					 * from our PID namespace) */
	uint16_t lport, pport;
	struct sc_addr16 laddr, paddr;
	uint32_t reason;                /* TCP: enum sc_fallback + 1, 0 = none */
	uint32_t pad;
	uint64_t peer_ident;            /* shared memory: the peer's identity (procs.c) */
	_Atomic uint64_t bytes_sent, bytes_received;    /* the program's, either path */
};
#define SC_STAT_RECS 4096

/* A connection that went to TCP as it was set up (a fallback reason, not
 * a switch from shared memory): every byte in its record went by TCP.
 * Those bytes are counted in the record alone, by its one writer (no
 * locked add on the process's counters per call), and moved to
 * bytes_tcp_* when the record is freed; a reader adds a live one's. */
static inline bool sc__rec_tcp_only(const struct sc_conn_rec *r)
{
	uint32_t why = __atomic_load_n(&r->reason, __ATOMIC_RELAXED);
	return atomic_load_explicit(&r->mode, memory_order_acquire) == SC_REC_TCP &&
	       why && why != SC_FB_SWITCHED + 1;
}

/* Which of struct sc_counters a live record's bytes count in (their
 * index, in 64-bit words): shared memory's, or TCP's for a connection on
 * TCP since its set-up; false for one counted there already. */
static inline bool sc__rec_counters(const struct sc_conn_rec *r, size_t *tx, size_t *rx)
{
	if (atomic_load_explicit(&r->mode, memory_order_acquire) == SC_REC_SHM) {
		*tx = offsetof(struct sc_counters, bytes_sent) / 8;
		*rx = offsetof(struct sc_counters, bytes_received) / 8;
	} else if (sc__rec_tcp_only(r)) {
		*tx = offsetof(struct sc_counters, bytes_tcp_sent) / 8;
		*rx = offsetof(struct sc_counters, bytes_tcp_received) / 8;
	} else {
		return false;
	}
	return true;
}

struct sc_stats_file {
	/* magic: stored last with __atomic_store_n (release), read with
	 * __atomic_load_n (acquire): plain, not _Atomic, because the
	 * command's reader (cli/stat.c) reads it with the builtin too, which
	 * clang refuses on an _Atomic field */
	uint32_t magic, version;
	int32_t pid;
	_Atomic uint32_t nrecs;         /* records [0, nrecs) were ever used */
	struct sc_counters c;
	char comm[16];
	/* the process's identity (procs.c): alive while it is, whatever PID
	 * namespace looks (pid is its pid in its own namespace, for people) */
	uint64_t ident;
	struct sc_conn_rec recs[SC_STAT_RECS];  /* lowest first: pages touched as used */
};

/* How many of f's records a reader looks at: those ever used (a reader
 * that touched them all would make the file's every page real). */
static inline uint32_t sc__stats_nrecs(const struct sc_stats_file *f)
{
	uint32_t n = atomic_load_explicit(&f->nrecs, memory_order_acquire);
	return n < SC_STAT_RECS ? n : SC_STAT_RECS;
}
#define SC_STATS_MAGIC 0x53435354u
/* 4: nrecs; 5: start; 6: spins_crowded (added without a bump: a run
 * directory of 5's then kept a stats-retired of the old size, so nothing
 * was ever collected again), the retired file named by the version;
 * 7: the process's identity instead of its start time, the peer's in each
 * record, files named stats-IDENT; 8: the bytes of a connection that
 * went to TCP as it was set up are in its record until it is freed
 * (sc__rec_tcp_only), not in bytes_tcp_*; 9: a client's closes, passive
 * or first (closes_passive, closes_active); 10: OPENs taken from a
 * client's word (opens_quiet) */
#define SC_STATS_VERSION_N 10
#define SC_STATS_VERSION ((uint32_t)SC_STATS_VERSION_N)
/* a change of either size is a new format: bump the version with it */
_Static_assert(sizeof(struct sc_counters) == 296, "struct sc_counters changed: bump SC_STATS_VERSION");
_Static_assert(sizeof(struct sc_stats_file) == 295248 + 8 * SC_STAT_RECS, "struct sc_stats_file changed: bump SC_STATS_VERSION");

/* A record for a connection of ours (NULL: table full or no stats file). */
struct sc_conn_rec *sc__rec_get(void);
void sc__rec_put(struct sc_conn_rec *r);

/* The counters of processes whose stats files were collected (dead):
 * <rundir>/stats-retired, under flock (exclusive to fold or reset, shared
 * to read with the live files). */
struct sc_stats_retired {
	_Atomic uint32_t magic;         /* set once (compare-exchange from 0) */
	uint32_t version;
	_Atomic uint64_t opens;         /* stats files made: every 64th collects */
	uint64_t processes;             /* files folded in */
	struct sc_counters c;
};
#define SC_RETIRED_MAGIC 0x53435254u
/* one per format: processes of two versions sharing a run directory each
 * fold into their own, and a file of another size never stops collection */
#define SC_RETIRED_STR2(v) #v
#define SC_RETIRED_STR(v) SC_RETIRED_STR2(v)
#define SC_RETIRED_FILE "stats-retired-v" SC_RETIRED_STR(SC_STATS_VERSION_N)

/* retired's flock held exclusively: fold one dead process's file into r
 * (what it counted, and the bytes of shared-memory connections it never
 * closed, as `shortcut stats` counts them). */
void sc__stats_fold(struct sc_stats_retired *r, const struct sc_stats_file *f);
/* Fold the stats files of dead processes into stats-retired and remove
 * them, with the rendezvous sockets of dead processes.  Without force, only
 * every 64th caller does (each new stats file calls it). */
void sc__stats_collect(bool force);
/* stats-retired mapped (created if need be) and its fd (for flock), or NULL. */
struct sc_stats_retired *sc__stats_retired(int *fd);

/* Map this process's stats file and move the counters there. */
int sc__stats_file_open(void);
/* In a child after fork (whose parent had a stats file): a file of its own,
 * counting from zero, made at its first connection record (sc__rec_get);
 * until then it counts into its parent's (their sum is what `shortcut
 * stats` shows).  A forking server's child that only serves the
 * connection its parent accepted makes none. */
void sc__stats_file_child(void);
/* Is this a fork child that has not made its file yet?  Its connections
 * that stay on TCP then get no record (their fallbacks are counted, in the
 * parent's file): making a file, and an identity, for a record cost a
 * server forking per connection ~100 us of each child's life. */
bool sc__stats_owed(void);

#endif
