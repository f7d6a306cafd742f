/* SPDX-License-Identifier: MIT */
/*
 * Device memory on a connection (devmem.h): the sender framing its ring and
 * copying payload into the receiver's region, the receiver reading records
 * as fragments.  Called from tx.c and rx.c with the direction's lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "conn.h"
#include "dmint.h"
#include "link.h"
#include "notify.h"
#include "txrx.h"
#include "sys.h"

uint64_t sc__dm_key(struct sc_conn *c)
{
	uint64_t k = c->g->id ^ ((uint64_t)(c->slot + 1) * 0x9e3779b97f4a7c15ull);
	return k ? k : 1;
}

/* ---- the sender ---------------------------------------------------------- */

/* txlock held: the receiver wants its payload in a region of its, and we
 * have that region mapped: the ring is framed from our whole cursor on
 * (held bytes, if any, stay plain bytes before it).  Once framed, always. */
void sc__dm_tx_prepare(struct sc_conn *c)
{
	if (c->dm_peer)
		return;
	uint32_t want = atomic_load_explicit(&c->tx.h->dm_want, memory_order_acquire);
	if (!want)
		return;
	struct sc_dm_peer *p = sc__dm_peer_find(&c->g->dm_peers, want);
	if (!p)
		return;         /* its DEVMEM message is on its way: plain bytes till then */
	atomic_store_explicit(&c->tx.h->framed_from, c->tx.prod + 1, memory_order_release);
	c->dm_peer = p;
}

/* txlock held, framed: one record of at most a chunk's bytes from src at
 * byte skip.  Returns the bytes sent (> 0), 0 if the ring has no room for
 * a record, -EAGAIN if no chunk is free (*seq: the free sequence seen
 * before looking, to wait on), -ENODATA if src's reader had nothing (what
 * it returned in src->end). */
ssize_t sc__dm_send_one(struct sc_conn *c, struct sc_src *src, size_t skip, size_t len,
			uint32_t *seq)
{
	struct sc_dm_peer *p = c->dm_peer;
	int64_t sp = sc__tx_space(c, sizeof(struct sc_dm_rec));
	if (sp < 0)
		return sp;
	if (sp < (int64_t)sizeof(struct sc_dm_rec))
		return 0;
	*seq = atomic_load_explicit(&p->hdr->free_seq, memory_order_acquire);
	int chunk = sc__dm_take_chunk(p, sc__dm_key(c));
	if (chunk < 0)
		return -EAGAIN;
	size_t n = len < p->chunk ? len : p->chunk;
	size_t off = (size_t)chunk * p->chunk, got = 0;
	if (src->rd) {
		/* a reader fills a chunk of ours (the region may not be
		 * ours to read into): through a buffer, at most a chunk */
		uint8_t buf[65536];
		struct iovec v = { buf, n < sizeof(buf) ? n : sizeof(buf) };
		ssize_t k = src->rd(src->arg, &v, 1);
		if (k <= 0) {
			sc__dm_untake_chunk(p, chunk);
			src->end = (int)k;
			return -ENODATA;
		}
		p->prov->copy_in(p->base, off, buf, (size_t)k);
		got = (size_t)k;
	}
	/* the payload: from the program's buffers straight into the region */
	for (int i = 0; !src->rd && i < src->iovcnt && got < n; i++) {
		size_t l = src->iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t k = l - skip < n - got ? l - skip : n - got;
		p->prov->copy_in(p->base, off + got, (const char *)src->iov[i].iov_base + skip, k);
		got += k;
		skip = 0;
	}
	p->prov->sync(p->base, off, got);
	struct sc_dm_rec r = { .id = p->id, .chunk = (uint32_t)chunk, .len = (uint32_t)got };
	r.check = SC_DM_REC_MAGIC ^ r.id ^ r.chunk ^ r.len;
	struct iovec ri = { &r, sizeof(r) };
	sc__ring_put(&c->tx, &ri, 1, 0, sizeof(r));
	sc__dm_count_bytes(got);
	return (ssize_t)got;
}

/* txlock held, no free chunk: wait for the receiver to free one (bounded
 * slices: the caller looks at the connection's state between them). */
void sc__dm_wait(struct sc_conn *c, uint32_t seq)
{
	sc__dm_count_wait();
	sc__dm_wait_chunk(c->dm_peer, seq, 20);
}

/* ---- the receiver -------------------------------------------------------- */

/* rxlock held: from now on the sender of c's receive ring puts the payload
 * in rx's region: say so in the ring header, and share the region with the
 * sending process (once per link group). */
int sc__dm_rx_start(struct sc_conn *c, struct sc_dm_rx *rx)
{
	uint32_t id = sc__dm_rx_id(rx);
	if (c->dm_rx_asked && atomic_load_explicit(&c->rx.h->dm_want, memory_order_relaxed) == id)
		return 0;
	int rc = sc__dm_share(c->g, id);
	if (rc == 0) {
		atomic_store_explicit(&c->rx.h->dm_want, id, memory_order_release);
		c->dm_rx_asked = true;
	}
	return rc;
}

/* The receiver's end of c (rxlock not needed): chunks the sender took for
 * it and never got to the program go back. */
void sc__dm_rx_end(struct sc_conn *c, struct sc_dm_rx *rx)
{
	pthread_mutex_lock(&rx->lock);
	sc__dm_reclaim(rx, sc__dm_key(c));
	pthread_mutex_unlock(&rx->lock);
}

void sc__dm_space_freed(struct sc_conn *c)
{
	/* the sender waits for a chunk with the write-blocked flag set (a
	 * polled sender) or in futex slices on the table (a blocking one) */
	if (atomic_load_explicit(&c->rx.h->tx_blocked, memory_order_acquire))
		sc__notify_peer(c);
}

/* rxlock held; the ring is at a record.  Hands out records as fragments
 * while there are, out has room, and the byte budget lasts (the first
 * always goes).  Returns the bytes handed out, or -errno (EPROTO: a record
 * the sender had no right to write). */
ssize_t sc__dm_recv_records(struct sc_conn *c, struct sc_dm_rx *rx, int64_t avail,
			    size_t budget, struct sc_dm_frag *out, int max, int *n)
{
	struct sc_dm_binding *b = rx->b;
	uint64_t key = sc__dm_key(c);
	size_t done = 0;
	pthread_mutex_lock(&rx->lock);
	while (avail >= (int64_t)sizeof(struct sc_dm_rec) && *n < max) {
		struct sc_dm_rec r;
		struct iovec ri = { &r, sizeof(r) };
		sc__ring_get(&c->rx, &ri, 1, sizeof(r), true);
		if (r.check != (SC_DM_REC_MAGIC ^ r.id ^ r.chunk ^ r.len) || r.id != b->id ||
		    r.chunk >= b->nchunks || !r.len || r.len > b->chunk ||
		    atomic_load_explicit(&b->owner[r.chunk], memory_order_acquire) != key ||
		    b->delivered[r.chunk]) {
			pthread_mutex_unlock(&rx->lock);
			return -EPROTO;
		}
		if (done && done + r.len > budget)
			break;
		int tok = sc__dm_token_new(rx, r.chunk);
		if (tok < 0) {
			pthread_mutex_unlock(&rx->lock);
			return done ? (ssize_t)done : tok;
		}
		b->delivered[r.chunk] = 1;
		sc__ring_get(&c->rx, &ri, 1, sizeof(r), false);
		avail -= (int64_t)sizeof(r);
		out[*n] = (struct sc_dm_frag){ .offset = (uint64_t)r.chunk * b->chunk,
					       .size = r.len, .token = (uint32_t)tok, .id = r.id };
		(*n)++;
		done += r.len;
		if (done >= budget)
			break;
	}
	pthread_mutex_unlock(&rx->lock);
	return (ssize_t)done;
}
