/* SPDX-License-Identifier: MIT */
/*
 * Byte ring: single producer, single consumer, one copy.  The producer
 * copies from the caller's buffers straight into the receiver's ring; the
 * consumer copies out.  Cursor publication follows SMC (smc_tx.c/smc_rx.c):
 * producer cursor with release after the copy, consumer cursor lazily.
 */
#include <errno.h>
#include <string.h>

#include "ring.h"

void sc__ring_init(struct sc_ring *r, struct sc_ring_hdr *h, uint8_t *data, uint32_t size)
{
	r->h = h;
	r->data = data;
	r->size = size;
	r->limit = sc__update_limit(size);
	r->win = size;
	r->prod = r->cons = r->cons_pub = r->pub = 0;
}

int64_t sc__ring_space(struct sc_ring *r, uint64_t want)
{
	uint64_t used = sc__ring_used(r->prod, r->cons);
	uint64_t free_ = used < r->win ? r->win - used : 0;

	if (free_ >= want)
		return (int64_t)free_;
	/* acquire: the consumer finished reading these bytes before it
	 * published the cursor, so we may overwrite them now */
	uint64_t c = atomic_load_explicit(&r->h->cons, memory_order_acquire);
	if (!sc__cursor_valid(r->cons, c, r->prod))
		return -EPROTO;
	r->cons = c;
	used = sc__ring_used(r->prod, c);
	return used < r->win ? (int64_t)(r->win - used) : 0;
}

/* Copy len bytes between ring position pos and buf, handling the wrap. */
static void copy_in(struct sc_ring *r, uint64_t cur, const uint8_t *src, size_t len)
{
	uint32_t pos = (uint32_t)(cur & (r->size - 1));
	size_t first = r->size - pos;

	if (first >= len) {
		memcpy(r->data + pos, src, len);
	} else {
		memcpy(r->data + pos, src, first);
		memcpy(r->data, src + first, len - first);
	}
}

static void copy_out(const struct sc_ring *r, uint64_t cur, uint8_t *dst, size_t len)
{
	uint32_t pos = (uint32_t)(cur & (r->size - 1));
	size_t first = r->size - pos;

	if (first >= len) {
		memcpy(dst, r->data + pos, len);
	} else {
		memcpy(dst, r->data + pos, first);
		memcpy(dst + first, r->data, len - first);
	}
}

size_t sc__ring_put(struct sc_ring *r, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t max)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < max; i++) {
		size_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t n = l - skip;
		if (n > max - done)
			n = max - done;
		copy_in(r, r->prod + done, (const uint8_t *)iov[i].iov_base + skip, n);
		done += n;
		skip = 0;
	}
	r->prod += done;
	return done;
}

int sc__ring_span(const struct sc_ring *r, uint64_t cur, size_t n, struct iovec v[2])
{
	uint32_t pos = (uint32_t)(cur & (r->size - 1));
	size_t first = r->size - pos;

	v[0].iov_base = r->data + pos;
	v[0].iov_len = first < n ? first : n;
	if (first >= n)
		return 1;
	v[1].iov_base = r->data;
	v[1].iov_len = n - first;
	return 2;
}

void sc__ring_publish(struct sc_ring *r)
{
	/* release: the bytes copied in are visible before the cursor that
	 * covers them.  The caller orders this store before its load of
	 * rx_armed with a full barrier (tx.c). */
	atomic_store_explicit(&r->h->prod, r->prod, memory_order_release);
	r->pub = r->prod;
}

void sc__ring_take_held(struct sc_ring *r)
{
	uint64_t p = atomic_load_explicit(&r->h->prod, memory_order_acquire);
	uint64_t h = atomic_load_explicit(&r->h->held, memory_order_acquire);
	/* (an invalid value is the consumer's -EPROTO at its next look) */
	if ((int64_t)(h - p) > 0 && h - p <= r->size)
		atomic_store_explicit(&r->h->prod, h, memory_order_release);
}

void sc__ring_publish_to(struct sc_ring *r, uint64_t pos)
{
	/* held first: a consumer that finds us dead takes every byte up to it */
	atomic_store_explicit(&r->h->held, r->prod, memory_order_release);
	if (pos != r->pub) {
		atomic_store_explicit(&r->h->prod, pos, memory_order_release);
		r->pub = pos;
	}
}

int64_t sc__ring_avail(struct sc_ring *r)
{
	/* acquire: pairs with the producer's release in sc__ring_publish */
	uint64_t p = atomic_load_explicit(&r->h->prod, memory_order_acquire);

	if (p != r->prod) {
		if (!sc__cursor_valid(r->prod, p, r->cons + r->size))
			return -EPROTO;
		r->prod = p;
	}
	return (int64_t)sc__ring_used(p, r->cons);
}

size_t sc__ring_get(struct sc_ring *r, const struct iovec *iov, int iovcnt,
		    size_t max, bool peek)
{
	size_t done = 0;

	for (int i = 0; i < iovcnt && done < max; i++) {
		size_t n = iov[i].iov_len;
		if (n > max - done)
			n = max - done;
		copy_out(r, r->cons + done, iov[i].iov_base, n);
		done += n;
	}
	if (!peek)
		r->cons += done;
	return done;
}

bool sc__ring_update_cons(struct sc_ring *r, bool force)
{
	uint64_t pending = r->cons - r->cons_pub;

	if (!pending)
		return force && atomic_load_explicit(&r->h->tx_blocked, memory_order_relaxed);
	/* relaxed load: a stale 0 only delays publication until the next
	 * read or the pre-sleep check, which uses force */
	bool blocked = atomic_load_explicit(&r->h->tx_blocked, memory_order_relaxed);
	if (!force && !blocked && pending < r->limit)
		return false;
	/* release: our reads of the ring finished before the producer may
	 * reuse the space; the fence orders it before the tx_blocked check
	 * (the producer does store tx_blocked, fence, load cons) */
	atomic_store_explicit(&r->h->cons, r->cons, memory_order_release);
	r->cons_pub = r->cons;
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->h->tx_blocked, memory_order_relaxed) != 0;
}
