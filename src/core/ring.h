/* SPDX-License-Identifier: MIT */
/*
 * One direction of a connection seen from one process: the producer's or the
 * consumer's private view of a shared ring.  The private view holds the
 * authoritative value of the cursor this side writes; the peer's cursor is
 * read from shared memory and validated before every use.
 */
#ifndef SC_RING_H
#define SC_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "layout.h"

struct sc_ring {
	struct sc_ring_hdr *h;  /* in the segment */
	uint8_t *data;          /* size bytes in the segment */
	uint32_t size;          /* power of two */
	uint32_t limit;         /* consumer update threshold */
	uint32_t win;           /* producer: bytes it may have in the ring (≤ size) */
	uint64_t prod;          /* producer: own cursor;  consumer: last valid peer cursor */
	uint64_t cons;          /* consumer: own cursor;  producer: last valid peer cursor */
	uint64_t cons_pub;      /* consumer: last cursor published */
	uint64_t pub;           /* producer: last cursor published (below prod
				 * while bytes are held back: SC_MORE, cork) */
};

void sc__ring_init(struct sc_ring *r, struct sc_ring_hdr *h, uint8_t *data, uint32_t size);

/* Producer: free bytes within win, refreshing the peer's cursor when the
 * cached view has less than want.  -EPROTO if the peer's cursor is invalid. */
int64_t sc__ring_space(struct sc_ring *r, uint64_t want);

/* Producer: copy up to max bytes (≤ space) from iov starting at byte skip of
 * the iov array into the ring; returns bytes copied.  Does not publish. */
size_t sc__ring_put(struct sc_ring *r, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t max);

/* The n bytes of the ring from cursor cur as one or two pieces (where it
 * wraps), for a caller that moves them itself (a reader filling free
 * space at prod, a writer taking bytes at cons: splice); the count. */
int sc__ring_span(const struct sc_ring *r, uint64_t cur, size_t n, struct iovec v[2]);

/* Producer: publish prod (release).  Before reading rx_armed the caller
 * needs a full barrier (Dekker with the consumer's arm-then-recheck). */
void sc__ring_publish(struct sc_ring *r);

/* Producer: publish up to pos (≤ prod); the bytes past it stay held, with
 * the whole of them noted in the header's held (see layout.h). */
void sc__ring_publish_to(struct sc_ring *r, uint64_t pos);

/* Consumer: bytes readable, refreshing the peer's cursor.  -EPROTO if the
 * peer's cursor is invalid. */
int64_t sc__ring_avail(struct sc_ring *r);

/* Consumer: copy up to max bytes (≤ avail) out to iov; consume unless peek. */
size_t sc__ring_get(struct sc_ring *r, const struct iovec *iov, int iovcnt,
		    size_t max, bool peek);

/* iov without its first skip bytes, in rest (room for iovcnt entries):
 * the count.  A call that moved part of its buffers goes on with the rest
 * (the receive path's next round; the interposer's calls cut short). */
static inline int sc__iov_rest(const struct iovec *iov, int iovcnt, size_t skip,
			       struct iovec *rest)
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

/* Consumer, once the producer is dead: publish the bytes it held back (as
 * the kernel sends what a dead process had queued). */
void sc__ring_take_held(struct sc_ring *r);

/* Consumer: publish the cursor if SMC's rule says so (or force); returns
 * true when the producer waits for space (tx_blocked) and must be woken. */
bool sc__ring_update_cons(struct sc_ring *r, bool force);

#endif
