/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory layout of a link group segment.  This is an ABI between two
 * processes that may run different builds: fixed-width fields, explicit
 * cache-line alignment, magic + version, and _Static_assert on every size and
 * offset the peer relies on.  Change anything here → bump SC_LAYOUT_VERSION.
 *
 * Segment (one memfd, sealed against resizing, mapped MAP_SHARED by both):
 *
 *   [0, 4 KiB)              struct sc_seg_hdr        written once by the creator
 *                                                    (joined: by the other side)
 *   [4 KiB, +32 KiB)        cells[2][256]            completion-channel cells
 *   [slots_off, ...)        struct sc_slot[nslots]   per-connection control
 *   [data_off, seg_size)    rings: slot s owns ring_size[0] + ring_size[1]
 *
 * Side 0 is the connecting process (it created the segment), side 1 the
 * accepting one.  Ring 0 carries side 0 → side 1, ring 1 the reverse; each
 * ring is the receiver's buffer in SMC terms (the "DMB"), written directly by
 * the sender.
 *
 * Everything in here can be scribbled on by a hostile peer: each field's
 * reader validates it (see ring.c and notify.c), and each side keeps the
 * authoritative copy of what it writes in private memory.
 */
#ifndef SC_LAYOUT_H
#define SC_LAYOUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SC_CACHELINE        64
#define SC_SEG_MAGIC        0x314745534354524fULL   /* "ORTCSEG1" */
#define SC_LAYOUT_VERSION   6   /* 6: the header says the accepting side joined */
#define SC_MAX_SLOTS        255                     /* SMC's per-link-group cap */
#define SC_MAX_CELLS        256
#define SC_CELL_NONE        0xffffffffu
#define SC_XCELLS           4       /* extra cells per slot side (cellx) */
#define SC_RING_MIN         (16u << 10)
/* A client's first bytes that the acceptor may put in the ring for it
 * before the OPEN (the offer's early bytes, src/rundir): at most this. */
#define SC_EARLY_MAX        248u
#define SC_RING_MAX         (8u << 20)

#define SC_ALIGNED __attribute__((aligned(SC_CACHELINE)))

/*
 * A completion-channel cell.  A receiving process owns cells[side][i]; each
 * of its channels (one per waiting context) uses one cell per link group.
 * armed:  set by the owner just before it sleeps, to SC_ARM_FUTEX (blocked
 *         calls sleeping in futex_wait on wake_seq) or SC_ARM_POLL (a waiter
 *         on the channel's pollable fd); taken (compare-exchange to 0) by
 *         whichever side then makes the one wake-up call.
 * wake_seq: bumped by the waker that took SC_ARM_FUTEX, before FUTEX_WAKE.
 *         A sleeper reads it before arming and sleeps only while it is
 *         unchanged, so a wake-up taken while it was on its way to sleep
 *         (and the token re-armed by another thread) is never missed.
 * wake_gen: owner bumps it when it hands the peer a new wake socket for this cell
 *         (CELL message first); a waker whose copy is older drains the
 *         group socket before it writes, so a recycled cell never gets its
 *         wake-up sent to the previous owner's socket.
 * futex_waiters: blocked calls of the owner sleeping on wake_seq while the
 *         cell is armed SC_ARM_POLL (their connection is polled or on a
 *         shared channel); a waker that delivers the poller's wake-up also
 *         bumps wake_seq and wakes them.
 * ready:  bit s set by a waker when connection slot s changed state for the
 *         owner; taken (exchange 0) by the owner's sc_chan_wait.  So one
 *         wake-up reports any number of ready connections.
 */
struct sc_cell {
	_Atomic uint32_t armed;
	_Atomic uint32_t wake_seq;
	_Atomic uint64_t ready[4];
	_Atomic uint32_t wake_gen;      /* generation of the wake socket sent with CELL */
	_Atomic uint32_t futex_waiters; /* blocked calls sleeping on wake_seq */
	uint64_t _pad1[2];
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_cell) == 64, "cell is one cache line");
#define SC_ARM_POLL      1u
#define SC_ARM_FUTEX    2u
#define SC_ARM_EDGE     0x80000000u     /* rx_armed/tx_blocked: edge interest */

/*
 * One direction of a connection.  Cursors are 64-bit byte counts (never
 * wrap in practice); the position in the ring is cursor & (size - 1).
 */
struct sc_ring_hdr {
	/* line 0 — written by the producer only: bytes produced ever.
	 * Stored with release after the bytes are copied in. */
	_Atomic uint64_t prod;
	/* the producer's whole cursor while it holds bytes back (SC_MORE,
	 * cork: copied in, not published yet); meaningful only when it is
	 * past prod by at most the ring's size.  A consumer that finds the
	 * producer dead publishes up to it (the kernel sends what a dead
	 * process had queued). */
	_Atomic uint64_t held;
	/* devmem (devmem.h): 0 while the ring carries plain bytes; from the
	 * cursor framed_from - 1 on, it carries records (struct sc_dm_rec)
	 * whose payload lies in the consumer's bound region.  Set once, by
	 * the producer, before it writes the first record (release). */
	_Atomic uint64_t framed_from;
	uint64_t _pad0[5];
	/* line 1 — written by the consumer only: bytes consumed, published
	 * lazily (SMC's rule: only once max(size/10, 2304) bytes are
	 * unconfirmed, or at once when the producer is write-blocked). */
	_Atomic uint64_t cons;
	/* devmem: the consumer's binding whose region it wants the payload
	 * in (0: none); written by the consumer, read by the producer */
	_Atomic uint32_t dm_want;
	uint32_t _pad1a;
	uint64_t _pad1[6];
	/* line 2 — written by the consumer only: non-zero while it wants to
	 * hear of new data (count of its threads waiting, plus SC_ARM_EDGE
	 * after a nonblocking call came back empty).  The producer only reads
	 * it: non-zero → wake the consumer's cell.  Never taken by the other
	 * side: a waker that clears a flag it cannot act on (cell not armed
	 * yet) loses the sleeper's next wake-up. */
	_Atomic uint32_t rx_armed;
	uint32_t _pad2[15];
	/* line 3 — written by the producer only, same encoding: non-zero
	 * while it waits for space (SMC's write_blocked).  The consumer then
	 * publishes its cursor on every read and wakes the producer's cell. */
	_Atomic uint32_t tx_blocked;
	uint32_t _pad3[15];
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_ring_hdr) == 256, "ring header size");
_Static_assert(offsetof(struct sc_ring_hdr, cons) == 64, "cons on its own line");
_Static_assert(offsetof(struct sc_ring_hdr, rx_armed) == 128, "rx_armed line");
_Static_assert(offsetof(struct sc_ring_hdr, tx_blocked) == 192, "tx_blocked line");

/* Connection state flags, per side, written only by that side. */
#define SC_SF_OPEN      0x01u   /* side is using the slot */
#define SC_SF_WR_DONE   0x02u   /* FIN: no more bytes will be produced (after prod) */
#define SC_SF_RD_DONE   0x04u   /* shut down reading: with WR_DONE, bytes sent to
				 * this side are refused (TCP answers them with RST) */
#define SC_SF_CLOSED    0x08u   /* closed cleanly */
#define SC_SF_ABORT     0x10u   /* RST: the peer gets ECONNRESET */
#define SC_SF_REFUSED   0x20u   /* listener refused (backlog full, closed) */
#define SC_SF_RELEASED  0x40u   /* side has let go of the slot for good */
#define SC_SF_FROZEN    0x80u   /* switching back to TCP: this side no longer reads
				 * or writes the rings; its consumed cursor is final */
#define SC_SF_ONTCP     0x100u  /* ... and has re-sent on TCP what the peer had not
				 * read: the connection is plain TCP from here */
#define SC_SF_FORKED    0x200u  /* the side forked since it set the connection up:
				 * a child may hold its kernel socket, so its
				 * death is a switch to TCP, not the end */
#define SC_SF_ALL       0x3ffu

struct sc_slot_side {
	_Atomic uint32_t flags;     /* SC_SF_*, release after the data they order */
	_Atomic uint32_t cell;      /* the side's cell for this slot, or SC_CELL_NONE */
	_Atomic int32_t pid;        /* informational (shortcut stat) */
	/* non-zero: a process that inherited this side's connection across
	 * fork asks the side to switch it back to TCP (the side's control
	 * thread takes it; anybody may set it, which costs only a switch) */
	_Atomic uint32_t sw_req;        /* SC_SWREQ_* */
	/* more cells of the side's for this slot (other waiting contexts
	 * watching the connection, e.g. more epoll sets), or SC_CELL_NONE:
	 * wakers treat each as they treat cell */
	_Atomic uint32_t cellx[SC_XCELLS];
	/* the connection's claim tag (interposer; 0: none): a process that
	 * inherited it across fork checks the slot still holds it */
	_Atomic uint64_t tag;
	/* the side's receive buffer as the program set it (SO_RCVBUF, bytes;
	 * 0: not set): with the peer's send buffer it bounds the bytes in
	 * flight towards the side (sc_set_bufs) */
	_Atomic uint32_t rcvbuf;
	uint32_t _pad[9 - SC_XCELLS];
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_slot_side) == 64, "slot side size");
_Static_assert(offsetof(struct sc_slot_side, tag) == 32, "slot side tag offset");
#define SC_SWREQ_USE    1u      /* it uses the connection */
#define SC_SWREQ_EPOLL  2u      /* ... in an epoll set it shares with the side */

/* Exact consumer cursor of the ring a side receives, stored by that side
 * after every read, on a line of its own that the peer reads only once the
 * side died: did it leave data unread (RST) or not (FIN)?  The ring's cons
 * is published lazily and cannot tell; flags share a line the peer reads on
 * every call, so this must not live there. */
struct sc_slot_consumed {
	_Atomic uint64_t rx_consumed;
	uint64_t _pad[7];
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_slot_consumed) == 64, "consumed line size");

struct sc_slot {
	struct sc_slot_side side[2];
	struct sc_slot_consumed consumed[2];
	struct sc_ring_hdr ring[2];     /* ring[d] carries side d → side !d */
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_slot) == 768, "slot size");
_Static_assert(offsetof(struct sc_slot, ring) == 256, "ring offset");

struct sc_seg_hdr {
	uint64_t magic;             /* SC_SEG_MAGIC */
	uint32_t version;           /* SC_LAYOUT_VERSION */
	uint32_t hdr_size;          /* sizeof(struct sc_seg_hdr) */
	uint64_t seg_size;          /* total bytes, equals the memfd size */
	uint64_t group_id;          /* random, names the group in stats */
	uint32_t nslots;            /* 1..SC_MAX_SLOTS */
	uint32_t ring_size[2];      /* power of two, SC_RING_MIN..SC_RING_MAX */
	uint32_t cells_off;         /* = 4096 */
	uint64_t slots_off;
	uint64_t data_off;
	int32_t  creator_pid;
	/* 1 once the accepting side mapped the segment (its HELLO read): it
	 * can then find a slot opened for one of its clients without an OPEN
	 * message (a quiet OPEN: SC_QUIET_*, conn.h).  Written by that side
	 * only (a lie hurts only its own connections) */
	_Atomic uint32_t joined;
	uint32_t _pad[1006];
};
_Static_assert(sizeof(struct sc_seg_hdr) == 4096, "segment header is one page");
_Static_assert(offsetof(struct sc_seg_hdr, nslots) == 32, "nslots offset");
_Static_assert(offsetof(struct sc_seg_hdr, data_off) == 56, "data_off offset");
_Static_assert(offsetof(struct sc_seg_hdr, joined) == 68, "joined offset");

#define SC_CELLS_OFF 4096u
#define SC_CELLS_SIZE (2u * SC_MAX_CELLS * sizeof(struct sc_cell))
_Static_assert(SC_CELLS_SIZE == 32768, "cells size");

static inline uint64_t sc__align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* The layout every valid segment has for these parameters (both peers
 * compute it; the accepting side checks the header against it). */
static inline void sc__seg_geometry(uint32_t nslots, const uint32_t ring[2],
				    uint64_t *slots_off, uint64_t *data_off,
				    uint64_t *seg_size)
{
	*slots_off = SC_CELLS_OFF + SC_CELLS_SIZE;
	*data_off = sc__align_up(*slots_off + (uint64_t)nslots * sizeof(struct sc_slot), 4096);
	*seg_size = *data_off + (uint64_t)nslots * ((uint64_t)ring[0] + ring[1]);
}

/* ---- cursor helpers (the one place cursor arithmetic lives) ----------- */

/* Bytes in the ring for producer cursor p and consumer cursor c. */
static inline uint64_t sc__ring_used(uint64_t p, uint64_t c)
{
	return p - c;
}

/* A cursor value read from the peer is valid iff it does not move backwards
 * from what we saw last and stays within [lo, hi] of our own view. */
static inline int sc__cursor_valid(uint64_t seen, uint64_t v, uint64_t hi)
{
	return (int64_t)(v - seen) >= 0 && (int64_t)(hi - v) >= 0;
}

/* SMC's consumer-cursor update threshold (rmbe_update_limit). */
static inline uint32_t sc__update_limit(uint32_t size)
{
	uint32_t tenth = size / 10;
	return tenth > 2304 ? tenth : 2304;
}

/*
 * Device memory (devmem.h): a receiver's bound region is shared with the
 * processes that send to it, with a chunk table in a memfd of its own:
 *
 *   struct sc_dm_hdr, then uint64_t owner[nchunks]
 *
 * A sender takes a free chunk (owner 0 → its connection's key, a
 * compare-and-swap), copies payload into the chunk in the region, and puts
 * a record naming it in the ring.  The receiver gives the chunk to the
 * program as a fragment and frees it (owner → 0) when the program returns
 * the fragment's token.  Both sides validate what they read.
 */
#define SC_DM_MAGIC     0x314d4544u     /* "DEM1" */
/* Chunk sizes: a page (the kernel's net_iov) in a small region, 64 KiB
 * from SC_DM_BIG_REGION on (fewer fragments a gigabyte: each costs the
 * receiver a token) */
#define SC_DM_CHUNK_MIN 4096u
#define SC_DM_CHUNK_MAX (64u << 10)
#define SC_DM_BIG_REGION (8u << 20)
struct sc_dm_hdr {
	uint32_t magic, version;        /* SC_DM_MAGIC, SC_LAYOUT_VERSION */
	uint32_t id;                    /* the receiver's binding id */
	uint32_t nchunks;
	uint64_t region_size;
	/* bumped by the receiver when it frees chunks; senders waiting for
	 * one sleep on it (futex) while waiters is non-zero */
	_Atomic uint32_t free_seq;
	_Atomic uint32_t waiters;
	_Atomic uint32_t hint;          /* unused since 0.4.3 (senders take the lowest
					 * free chunk); written by earlier senders */
	uint32_t chunk;                 /* chunk size: a power of two, MIN..MAX */
	uint32_t _pad[6];
} SC_ALIGNED;
_Static_assert(sizeof(struct sc_dm_hdr) == 64, "devmem header size");

/* A record in a framed ring: len bytes of payload in chunk `chunk` of
 * binding `id`'s region, from the chunk's start. */
#define SC_DM_REC_MAGIC 0x5d4du
struct sc_dm_rec {
	uint32_t id;
	uint32_t chunk;
	uint32_t len;
	uint32_t check;         /* SC_DM_REC_MAGIC ^ id ^ chunk ^ len */
};
_Static_assert(sizeof(struct sc_dm_rec) == 16, "devmem record size");

#endif /* SC_LAYOUT_H */
