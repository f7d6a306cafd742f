/* SPDX-License-Identifier: MIT */
/*
 * The offers of an offer board (board.c maps the boards): one entry per
 * client port, posted by the connecting client, claimed or declined by the
 * accepting process, with the client's early bytes beside it; which of
 * their pages a process saw backed.  Every field a peer writes is checked
 * where it is read (fuzz_board).
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rundir.h"
#include "sys.h"

/* ---- offers ------------------------------------------------------------- */

/* The entry names this connection: cport and both addresses as the
 * accepting side sees them (local: its own, remote: the client's), which
 * are the client's own view unless something between them rewrites
 * addresses (NAT: such a connection stays on TCP); a loopback connection
 * only within one network namespace (127.0.0.1 in another is another
 * host). */
static bool offer_matches(const struct sc_offer *o, uint16_t cport, const struct sc_addr16 *local,
			  const struct sc_addr16 *remote)
{
	return o->cport == cport && !memcmp(&o->daddr, local, 16) &&
	       !memcmp(&o->saddr, remote, 16) &&
	       (!sc__addr_is_loopback(local) || o->netns == sc__netns());
}

/* A decline younger than this answers a late offer; older, it is left
 * over (its connection long gone, the port in use again). */
#define DECLINE_FRESH_MS 1000u

/* The identity of the process that wrote entry o's word w, or is writing
 * it (BUSY: its identity is the word's tag). */
static uint64_t offer_writer(struct sc_offer *o, uint64_t w)
{
	if ((w & 0xff) == SC_OFFER_BUSY)
		return w >> 8;
	return atomic_load_explicit(&o->writer, memory_order_relaxed);
}

/*
 * Every transition of an offer's word (FREE → BUSY, OFFERED → CLAIMED,
 * → WITHDRAWN, DECLINED → FREE): a compare-exchange, seq_cst as it always
 * was (acq_rel would do: the fields an entry's writer filled are released
 * by offer_fill's store of the word and acquired by each reader's load of
 * it, and a taker must see the previous use's fields done with).
 */
static bool word_cas(_Atomic uint64_t *word, uint64_t *w, uint64_t to)
{
	return atomic_compare_exchange_strong_explicit(word, w, to, memory_order_seq_cst,
						       memory_order_seq_cst);
}

/* Take entry o (its word was w) to write it: BUSY under our identity. */
static bool offer_take(struct sc_offer *o, uint64_t *w, uint64_t me)
{
	return word_cas(&o->word, w, SC_OFFER_WORD(me, SC_OFFER_BUSY));
}

/* Fill entry o we took (as me) and publish it as word `final`. */
static void offer_fill(struct sc_offer *o, uint16_t cport, const struct sc_addr16 *src,
		       const struct sc_addr16 *dst, uint8_t syn_ttl, uint64_t me, uint64_t final)
{
	o->cport = cport;
	o->syn_ttl = syn_ttl;
	o->daddr = *dst;
	o->saddr = *src;
	o->netns = sc__netns();
	atomic_store_explicit(&o->writer, me, memory_order_relaxed);
	o->time_ms = sc__board_ms();
	atomic_store_explicit(&o->word, final, memory_order_release);
}

int sc__offer_post(struct sc_board *b, uint16_t cport, const struct sc_addr16 *src,
		   const struct sc_addr16 *dst, uint8_t syn_ttl, uint64_t tag, uint64_t max_seg)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t me = sc__self();
	int saved = errno;

	if (!me)
		return -ESRCH;
	if (sc__offer_backed(b, cport) < 0 || sc__early_backed(b, cport) < 0)
		return -ENOSPC;
	for (;;) {
		uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
		uint32_t st = w & 0xff;
		if (st == SC_OFFER_DECLINED && (w >> 8) == 0 && offer_matches(o, cport, dst, src) &&
		    sc__board_ms() - o->time_ms < DECLINE_FRESH_MS) {
			/* the accepting side was first: it saw no mark */
			word_cas(&o->word, &w, 0);
			errno = saved;
			return -ECONNREFUSED;
		}
		if (st != SC_OFFER_FREE && st != SC_OFFER_DECLINED && st != SC_OFFER_WITHDRAWN &&
		    sc__proc_alive(offer_writer(o, w))) {
			errno = saved;
			return -EBUSY;          /* a live offer of another netns */
		}
		if (!offer_take(o, &w, me))
			continue;
		/* no early bytes yet, no quiet OPEN (published with the
		 * word, release) */
		atomic_store_explicit(&b->early[cport].len, 0, memory_order_relaxed);
		atomic_store_explicit(&o->quiet, 0, memory_order_relaxed);
		o->max_seg = max_seg;
		offer_fill(o, cport, src, dst, syn_ttl, me, SC_OFFER_WORD(tag, SC_OFFER_OFFERED));
		errno = saved;
		return cport;
	}
}

/* The board pages this process has seen backed, per port (a page of a
 * tmpfs file, once allocated, stays): one bit a page, so that a
 * connection asks the kernel only the first time its entries' pages are
 * met. */
#define BACKED_PAGES (sizeof(struct sc_board) / 4096 + 1)
static _Atomic(_Atomic uint64_t *) backed_map[65536];

void sc__offers_backed_forget(uint16_t port)
{
	_Atomic uint64_t *m = atomic_load_explicit(&backed_map[port], memory_order_acquire);
	for (size_t i = 0; m && i < BACKED_PAGES / 64 + 1; i++)
		atomic_store_explicit(&m[i], 0, memory_order_relaxed);
}

static bool page_bits(_Atomic uint64_t *m, size_t first, size_t last, bool set)
{
	for (size_t pg = first; pg <= last; pg++) {
		uint64_t bit = 1ull << (pg % 64);
		if (set)
			atomic_fetch_or_explicit(&m[pg / 64], bit, memory_order_relaxed);
		else if (!(atomic_load_explicit(&m[pg / 64], memory_order_relaxed) & bit))
			return false;
	}
	return true;
}

static int backed_cached(struct sc_board *b, void *p, size_t len)
{
	uint16_t port = (uint16_t)b->port;     /* (a scribble only costs a look) */
	size_t off = (size_t)((uint8_t *)p - (uint8_t *)b);
	size_t first = off / 4096, last = (off + len - 1) / 4096;
	_Atomic uint64_t *m = atomic_load_explicit(&backed_map[port], memory_order_acquire);
	if (!m) {
		_Atomic uint64_t *n = calloc(BACKED_PAGES / 64 + 1, sizeof(*n));
		_Atomic uint64_t *none = NULL;
		/* acq_rel: our zeroed map before its pointer (release), or
		 * the winner's (acquire); pairs with the acquire above */
		if (n && !atomic_compare_exchange_strong_explicit(&backed_map[port], &none, n,
								  memory_order_acq_rel,
								  memory_order_acquire)) {
			free(n);
			n = none;
		}
		if (!(m = n))
			return sc__backed(p, len);
	}
	if (page_bits(m, first, last, false))
		return 0;
	int rc = sc__backed(p, len);
	if (!rc)
		page_bits(m, first, last, true);
	return rc;
}

int sc__offer_backed(struct sc_board *b, uint16_t cport)
{
	return backed_cached(b, &b->offers[cport], sizeof(b->offers[cport]));
}

int sc__early_backed(struct sc_board *b, uint16_t cport)
{
	/* written by the client (the length reset with each offer), sealed
	 * by the acceptor */
	return backed_cached(b, &b->early[cport], sizeof(b->early[cport]));
}

size_t sc__offer_early(struct sc_board *b, int idx, uint64_t tag, uint32_t at,
		       const void *buf, size_t len)
{
	struct sc_early *e = &b->early[idx];
	/* (our own word: only the claimer's seal changes it meanwhile) */
	uint32_t l = atomic_load_explicit(&e->len, memory_order_relaxed);
	uint32_t lead = l & SC_EARLY_LEAD ? 1 : 0, room = SC_EARLY_MAX - lead;

	if (at >= room || !len || (l & ~SC_EARLY_LEAD) != at ||
	    atomic_load_explicit(&b->offers[idx].word, memory_order_relaxed) !=
	    SC_OFFER_WORD(tag, SC_OFFER_OFFERED))
		return 0;
	if (len > room - at)
		len = room - at;
	memcpy(e->data + at, buf, len);
	/* release: the bytes before the length; fails once sealed */
	if (!atomic_compare_exchange_strong_explicit(&e->len, &l, l + (uint32_t)len,
						     memory_order_release, memory_order_relaxed))
		return 0;
	return len;
}

bool sc__offer_lead(struct sc_board *b, int idx, uint64_t tag)
{
	struct sc_early *e = &b->early[idx];
	uint32_t l = 0;

	if (atomic_load_explicit(&b->offers[idx].word, memory_order_relaxed) !=
	    SC_OFFER_WORD(tag, SC_OFFER_OFFERED))
		return false;
	/* pairs with the claimer's seal (sc__offer_early_take): one of the
	 * two read-modify-writes of len comes first, and the other sees it
	 * (a claim between our look at the word and this fails it: the
	 * claimer seals before it uses the bytes) */
	return atomic_compare_exchange_strong_explicit(&e->len, &l, SC_EARLY_LEAD,
						       memory_order_relaxed, memory_order_relaxed);
}

const uint8_t *sc__offer_early_take(struct sc_board *b, int idx, uint32_t *len, bool *lead)
{
	struct sc_early *e = &b->early[idx];
	/* acquire: the bytes the client published before its length */
	uint32_t l = atomic_fetch_or_explicit(&e->len, SC_EARLY_SEALED, memory_order_acquire);

	*lead = l & SC_EARLY_LEAD;
	l &= ~(SC_EARLY_SEALED | SC_EARLY_LEAD);
	*len = l <= SC_EARLY_MAX - *lead ? l : 0;      /* a scribbled length: none */
	return e->data;
}

uint32_t sc__offer_state(struct sc_board *b, int idx, uint64_t tag)
{
	uint64_t w = atomic_load_explicit(&b->offers[idx].word, memory_order_acquire);
	if (w >> 8 != tag)
		return SC_OFFER_CLAIMED;        /* claimed and done with */
	return w & 0xff;
}

uint64_t sc__offer_claimer(struct sc_board *b, int idx, uint64_t tag)
{
	struct sc_offer *o = &b->offers[idx];
	uint64_t who = atomic_load_explicit(&o->claimer, memory_order_relaxed);
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
	return w == SC_OFFER_WORD(tag, SC_OFFER_CLAIMED) ? who : 0;
}

uint64_t sc__offer_max_seg(struct sc_board *b, int idx)
{
	return b->offers[idx].max_seg;
}

uint64_t sc__offer_claimer_hint(struct sc_board *b, int idx)
{
	return atomic_load_explicit(&b->offers[idx].claimer, memory_order_relaxed);
}

bool sc__offer_withdraw(struct sc_board *b, int idx, uint64_t tag)
{
	_Atomic uint64_t *w = &b->offers[idx].word;
	uint64_t v = SC_OFFER_WORD(tag, SC_OFFER_OFFERED);
	/* the fields stay: an acceptor that has not looked yet learns that
	 * the client is gone instead of waiting for an offer */
	if (word_cas(w, &v, SC_OFFER_WORD(tag, SC_OFFER_WITHDRAWN)))
		return true;
	v = SC_OFFER_WORD(tag, SC_OFFER_DECLINED);
	return word_cas(w, &v, 0);
}

bool sc__offer_withdrawn(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
			 const struct sc_addr16 *remote)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);

	/* fresh only: an older connection of the same 4-tuple (TIME_WAIT
	 * reuse on loopback takes a second at least) left its entry too */
	return (w & 0xff) == SC_OFFER_WITHDRAWN && offer_matches(o, cport, local, remote) &&
	       sc__board_ms() - o->time_ms < 1000;
}

bool sc__offer_named(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
		     const struct sc_addr16 *remote)
{
	struct sc_offer *o = &b->offers[cport];
	/* acquire: the fields written before the word went OFFERED */
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
	return (w & 0xff) == SC_OFFER_OFFERED && offer_matches(o, cport, local, remote);
}

int sc__offer_claim(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
		    const struct sc_addr16 *remote, uint8_t syn_ttl, uint64_t *client,
		    uint64_t *tag)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);

	/* (acquire: the fields written before the word went OFFERED; the tag
	 * compared where both have one: a client that could not tag its SYN,
	 * Multipath TCP's, offers none, and its addresses must do, as an
	 * unmarked SYN's) */
	if ((w & 0xff) != SC_OFFER_OFFERED || !offer_matches(o, cport, local, remote) ||
	    (syn_ttl && o->syn_ttl && o->syn_ttl != syn_ttl))
		return -1;
	/* our identity only now: a plain client's connection (most of a
	 * forking server's children's) needs none */
	uint64_t me = sc__self();
	if (!me)
		return -1;
	uint64_t p = atomic_load_explicit(&o->writer, memory_order_relaxed);
	/* one process accepts a connection: no other claimer races us */
	atomic_store_explicit(&o->claimer, me, memory_order_relaxed);
	/* if the CAS succeeds, the fields we checked were that offer's (a
	 * new offer in the entry would have a new tag) */
	if (!word_cas(&o->word, &w, SC_OFFER_WORD(w >> 8, SC_OFFER_CLAIMED)))
		return -1;
	*client = p;
	*tag = w >> 8;
	return cport;
}

/* An entry is BUSY for the few stores between offer_take and offer_fill.
 * One BUSY for longer is not waited for: its writer is stopped there
 * (SIGSTOP, a debugger), or the word is a peer's scribble naming a live
 * pid (a waited-for scribble would hang the accepting side's accept():
 * fuzz_board). */
#define BUSY_WAIT_MS 20u

int sc__offer_decline_tuple(struct sc_board *b, uint16_t cport, const struct sc_addr16 *local,
			    const struct sc_addr16 *remote, int *idx)
{
	struct sc_offer *o = &b->offers[cport];
	uint64_t busy_since = 0, me = sc__self();
	int saved = errno;

	*idx = -1;
	if (!me) {
		errno = saved;
		return 0;               /* (no identity: nothing can be written) */
	}
	for (;;) {
		uint64_t w = atomic_load_explicit(&o->word, memory_order_acquire);
		uint32_t st = w & 0xff;
		if (st == SC_OFFER_OFFERED && offer_matches(o, cport, local, remote))
			return -EAGAIN;         /* it came after all */
		if (st == SC_OFFER_BUSY && sc__proc_alive(offer_writer(o, w))) {
			/* an offer being written: ours, or another netns's;
			 * past the bound, another's (below) */
			uint64_t now = sc__board_ms();
			if (!busy_since)
				busy_since = now;
			if (now - busy_since < BUSY_WAIT_MS) {
				sched_yield();
				continue;
			}
		}
		if (st != SC_OFFER_FREE && st != SC_OFFER_DECLINED && st != SC_OFFER_WITHDRAWN &&
		    sc__proc_alive(offer_writer(o, w))) {
			errno = saved;
			return 0;               /* another's: our client cannot post */
		}
		if (!offer_take(o, &w, me))
			continue;
		o->max_seg = 0;
		offer_fill(o, cport, remote, local, 0, me, SC_OFFER_WORD(0, SC_OFFER_DECLINED));
		*idx = cport;
		errno = saved;
		return 0;
	}
}

void sc__offer_undecline(struct sc_board *b, int idx, const struct sc_addr16 *local,
			 const struct sc_addr16 *remote)
{
	struct sc_offer *o = &b->offers[idx];
	uint64_t w = SC_OFFER_WORD(0, SC_OFFER_DECLINED);
	if (offer_matches(o, (uint16_t)idx, local, remote) &&
	    atomic_load_explicit(&o->writer, memory_order_relaxed) == sc__self())
		word_cas(&o->word, &w, 0);
}

void sc__offer_done(struct sc_board *b, int idx)
{
	atomic_store_explicit(&b->offers[idx].word, 0, memory_order_release);
}

_Atomic uint64_t *sc__offer_quiet(struct sc_board *b, int idx)
{
	return &b->offers[idx].quiet;
}

void sc__offer_opened(struct sc_board *b, int idx, uint64_t tag)
{
	uint64_t w = SC_OFFER_WORD(tag, SC_OFFER_CLAIMED);
	word_cas(&b->offers[idx].word, &w, 0);
}

void sc__offer_decline(struct sc_board *b, int idx, uint64_t tag)
{
	atomic_store_explicit(&b->offers[idx].word, SC_OFFER_WORD(tag, SC_OFFER_DECLINED),
			      memory_order_release);
}
