/* SPDX-License-Identifier: MIT */
/*
 * The offer board (src/rundir/board.c): the compare-and-swaps by which a
 * client and the process that accepts its connection agree whether it goes
 * on shared memory, the connecting slots, the listener entries.  The
 * board's files live in a private run directory (SHORTCUT_RUNDIR, set
 * before the library's first use, removed at the end).
 *
 *  1. post vs decline, raced by two threads: the client posts its offer
 *     while the acceptor claims or, finding none, declines the 4-tuple and
 *     claims after all if the offer came meanwhile (-EAGAIN).  Both sides
 *     always agree: a posted offer is claimed, a refused one (-ECONNREFUSED,
 *     or -EBUSY when the post saw the decline being written) was declined.
 *     Each round starts from an entry whose last writer is gone (pid 0):
 *     an entry being written is judged by the pid in its BUSY word, never
 *     by the entry's pid, still the previous writer's (which once let the
 *     other side take the entry over in the middle of the write).
 *  2. withdraw vs claim, raced: exactly one wins.
 *  3. claim vs claim, raced: the compare-and-swap lets one through.
 *  4. a withdrawn offer cannot be claimed; the acceptor learns the client
 *     is gone.
 *  5. a late offer after a decline gets -ECONNREFUSED (once: the refusal
 *     frees the entry); a decline of another 4-tuple refuses nothing; a
 *     stale decline (older than 1 s) refuses nothing; an entry BUSY for
 *     good under a live pid is not waited for without end.
 *  6. tags: a transition applies to the offer with that tag only.
 *  6b. pairing: an offer is claimed only for its own connection (the
 *     client's address, its SYN's tag, its network namespace on loopback).
 *  7. the connecting slots: take, free, anyone_connecting, stale slots.
 *  8. listener entries: listen, serves, unlisten, wildcard, and an entry
 *     dies with its process (the OFD lock); a listener that defers its
 *     accepts (TCP_DEFER_ACCEPT), set at listen or later, for its
 *     addresses only.
 * 10. early bytes and the lead byte: what a client publishes, and whether
 *     its first byte went on TCP, is what the claimer's seal takes;
 *     lead vs seal raced: both sides agree on the lead byte, and on
 *     every early byte.
 *  9. the mappings are bounded: meeting many ports leaves no more than
 *     SC_BOARD_CACHE boards mapped (/proc/self/maps); a board looked up
 *     between every new mapping stays; held boards stay, however many;
 *     threads looking boards up and letting go while others are mapped
 *     and unmapped read only mapped boards (the ASan and TSan builds).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rundir.h"
#include "t_util.h"

static char rundir[64] = "/tmp/sc-test-board-XXXXXX";

static struct sc_addr16 addr4(const char *ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct sc_addr16 a;
	T_ASSERT(inet_pton(AF_INET, ip, &sa.sin_addr) == 1);
	T_ASSERT(sc__addr16((struct sockaddr *)&sa, &a, NULL));
	return a;
}

static uint32_t word_state(struct sc_board *b, int idx)
{
	return (uint32_t)(atomic_load(&b->offers[idx].word) & 0xff);
}

static uint64_t word_tag(struct sc_board *b, int idx)
{
	return atomic_load(&b->offers[idx].word) >> 8;
}

/* ---- the races ------------------------------------------------------------ */

enum { R_POST_DECLINE, R_WITHDRAW_CLAIM, R_CLAIM_CLAIM };

struct race {
	struct sc_board *b;
	int kind;
	long rounds;
	pthread_barrier_t start, end;
	struct sc_addr16 local;
	/* this round's */
	uint16_t cport;
	uint64_t tag;
	/* results, by side (0: client, 1: acceptor) */
	int post_rc, claim_rc[2], decline_rc, decline_idx;
	bool withdrew;
	uint64_t claimed_tag[2];
};

/* the client's side of a round */
static void client_side(struct race *r)
{
	switch (r->kind) {
	case R_POST_DECLINE:
		r->post_rc = sc__offer_post(r->b, r->cport, &r->local, &r->local, 0, r->tag, 0);
		break;
	case R_WITHDRAW_CLAIM:
		r->withdrew = sc__offer_withdraw(r->b, r->cport, r->tag);
		break;
	case R_CLAIM_CLAIM: {
		uint64_t who;
		r->claim_rc[0] = sc__offer_claim(r->b, r->cport, &r->local, &r->local, 0, &who,
						 &r->claimed_tag[0]);
		break;
	}
	}
}

/* the acceptor's: claim, else decline, else (the offer came) claim */
static void acceptor_side(struct race *r)
{
	uint64_t who;
	r->claim_rc[1] = sc__offer_claim(r->b, r->cport, &r->local, &r->local, 0, &who,
					 &r->claimed_tag[1]);
	if (r->kind != R_POST_DECLINE || r->claim_rc[1] >= 0)
		return;
	r->decline_rc = sc__offer_decline_tuple(r->b, r->cport, &r->local, &r->local,
						&r->decline_idx);
	if (r->decline_rc == -EAGAIN) {
		r->claim_rc[1] = sc__offer_claim(r->b, r->cport, &r->local, &r->local, 0, &who,
						 &r->claimed_tag[1]);
		T_EQ(r->claim_rc[1], r->cport);
	}
}

static void *client_thread(void *arg)
{
	struct race *r = arg;
	for (long i = 0; i < r->rounds; i++) {
		pthread_barrier_wait(&r->start);
		client_side(r);
		pthread_barrier_wait(&r->end);
		pthread_barrier_wait(&r->end);  /* the main thread checked */
	}
	return NULL;
}

static void *acceptor_thread(void *arg)
{
	struct race *r = arg;
	for (long i = 0; i < r->rounds; i++) {
		pthread_barrier_wait(&r->start);
		acceptor_side(r);
		pthread_barrier_wait(&r->end);
		pthread_barrier_wait(&r->end);
	}
	return NULL;
}

/* The rounds: the main thread sets each up, the two threads race (released
 * together by a barrier), the main thread checks the outcome and frees the
 * entry. */
static void race(struct sc_board *b, int kind, const char *what)
{
	static struct race r;
	struct t_rng rng;
	long n_a = 0, n_b = 0, n_c = 0;
	pthread_t tc, ta;

	memset(&r, 0, sizeof(r));
	r.b = b;
	r.kind = kind;
	r.rounds = (long)t_scale(20000, 2000);
	r.local = addr4("127.0.0.1");
	t_rng_seed(&rng, t_seed() + (uint64_t)kind);
	T_ASSERT(pthread_barrier_init(&r.start, NULL, 3) == 0);
	T_ASSERT(pthread_barrier_init(&r.end, NULL, 3) == 0);
	T_ASSERT(pthread_create(&tc, NULL, client_thread, &r) == 0);
	T_ASSERT(pthread_create(&ta, NULL, acceptor_thread, &r) == 0);
	for (long i = 0; i < r.rounds; i++) {
		uint64_t who;
		r.cport = (uint16_t)(1024 + i % 4096);
		r.tag = (t_rng_next(&rng) & SC_TAG_MASK) | 1;
		r.post_rc = r.decline_rc = -1234;
		r.claim_rc[0] = r.claim_rc[1] = -1234;
		r.decline_idx = -1234;
		r.withdrew = false;
		T_EQ(word_state(b, r.cport), SC_OFFER_FREE);
		b->offers[r.cport].writer = 0;  /* its last writer gone */
		if (kind != R_POST_DECLINE)
			T_EQ(sc__offer_post(b, r.cport, &r.local, &r.local, 0, r.tag, 0), r.cport);
		pthread_barrier_wait(&r.start);
		pthread_barrier_wait(&r.end);
		switch (kind) {
		case R_POST_DECLINE:
			if (r.post_rc == r.cport) {
				/* posted: the acceptor claimed it, directly or after -EAGAIN */
				T_EQ(r.claim_rc[1], r.cport);
				T_EQ(r.claimed_tag[1], r.tag);
				T_EQ(sc__offer_state(b, r.cport, r.tag), SC_OFFER_CLAIMED);
				T_EQ(sc__offer_claimer(b, r.cport, r.tag), sc__self());
				sc__offer_done(b, r.cport);
				n_a++;
			} else if (r.post_rc == -ECONNREFUSED) {
				/* declined first: the refusal took the decline away */
				T_EQ(r.claim_rc[1], -1);
				T_EQ(r.decline_rc, 0);
				T_EQ(r.decline_idx, r.cport);
				T_EQ(word_state(b, r.cport), SC_OFFER_FREE);
				n_b++;
			} else {
				/* the post saw the decline being written: not posted */
				T_EQ(r.post_rc, -EBUSY);
				T_EQ(r.claim_rc[1], -1);
				T_EQ(r.decline_rc, 0);
				T_EQ(r.decline_idx, r.cport);
				T_EQ(word_state(b, r.cport), SC_OFFER_DECLINED);
				sc__offer_undecline(b, r.cport, &r.local, &r.local);
				n_c++;
			}
			break;
		case R_WITHDRAW_CLAIM:
			if (r.withdrew) {
				T_EQ(r.claim_rc[1], -1);
				T_EQ(sc__offer_state(b, r.cport, r.tag), SC_OFFER_WITHDRAWN);
				T_ASSERT(sc__offer_withdrawn(b, r.cport, &r.local, &r.local));
				n_a++;
			} else {
				T_EQ(r.claim_rc[1], r.cport);
				T_EQ(r.claimed_tag[1], r.tag);
				T_EQ(sc__offer_state(b, r.cport, r.tag), SC_OFFER_CLAIMED);
				n_b++;
			}
			/* the acceptor is done with the entry either way */
			sc__offer_done(b, r.cport);
			break;
		case R_CLAIM_CLAIM:
			T_ASSERTF((r.claim_rc[0] >= 0) != (r.claim_rc[1] >= 0),
				  "claims %d and %d", r.claim_rc[0], r.claim_rc[1]);
			T_EQ(r.claimed_tag[r.claim_rc[0] >= 0 ? 0 : 1], r.tag);
			T_EQ(sc__offer_state(b, r.cport, r.tag), SC_OFFER_CLAIMED);
			T_EQ(sc__offer_claim(b, r.cport, &r.local, &r.local, 0, &who,
					     &r.claimed_tag[0]), -1);
			sc__offer_done(b, r.cport);
			if (r.claim_rc[0] >= 0)
				n_a++;
			else
				n_b++;
			break;
		}
		pthread_barrier_wait(&r.end);
	}
	pthread_join(tc, NULL);
	pthread_join(ta, NULL);
	pthread_barrier_destroy(&r.start);
	pthread_barrier_destroy(&r.end);
	switch (kind) {
	case R_POST_DECLINE:
		t_log("%s: %ld rounds: posted and claimed %ld, refused %ld, busy %ld",
		      what, r.rounds, n_a, n_b, n_c);
		break;
	case R_WITHDRAW_CLAIM:
		t_log("%s: %ld rounds: withdrawn %ld, claimed %ld", what, r.rounds, n_a, n_b);
		break;
	case R_CLAIM_CLAIM:
		t_log("%s: %ld rounds: first claimer %ld, second %ld", what, r.rounds, n_a, n_b);
		break;
	}
}

/* ---- one transition at a time ---------------------------------------------- */

static void withdrawn(struct sc_board *b)
{
	struct sc_addr16 lo = addr4("127.0.0.1");
	uint16_t cport = 40001;
	uint64_t tag = 0x1234567, t;
	uint64_t pid;

	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag, 0), cport);
	T_EQ(sc__offer_state(b, cport, tag), SC_OFFER_OFFERED);
	T_ASSERT(!sc__offer_withdrawn(b, cport, &lo, &lo));
	T_ASSERT(sc__offer_withdraw(b, cport, tag));
	T_EQ(sc__offer_state(b, cport, tag), SC_OFFER_WITHDRAWN);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), -1);
	T_ASSERT(sc__offer_withdrawn(b, cport, &lo, &lo));
	/* a second withdrawal finds nothing to withdraw */
	T_ASSERT(!sc__offer_withdraw(b, cport, tag));
	/* the acceptor declines the tuple: the withdrawn entry is free to it */
	int idx;
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), 0);
	T_EQ(idx, cport);
	sc__offer_undecline(b, idx, &lo, &lo);
	T_EQ(word_state(b, cport), SC_OFFER_FREE);

	/* an offer the acceptor declined after a claim (sc__offer_decline):
	 * withdrawing it frees the entry */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag, 0), cport);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	sc__offer_decline(b, cport, tag);
	T_EQ(sc__offer_state(b, cport, tag), SC_OFFER_DECLINED);
	T_ASSERT(sc__offer_withdraw(b, cport, tag));
	T_EQ(atomic_load(&b->offers[cport].word), 0);
}

static void declines(struct sc_board *b)
{
	struct sc_addr16 lo = addr4("127.0.0.1"), lo2 = addr4("127.0.0.2");
	uint16_t cport = 40002;
	int idx;
	uint64_t pid;
	uint64_t t;

	/* late offer after a decline: refused, once */
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), 0);
	T_EQ(idx, cport);
	T_EQ(word_state(b, cport), SC_OFFER_DECLINED);
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x77, 0), -ECONNREFUSED);
	T_EQ(word_state(b, cport), SC_OFFER_FREE);
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x78, 0), cport);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	T_EQ(t, 0x78);
	sc__offer_done(b, cport);

	/* a decline of the same client port to another address: not ours */
	T_EQ(sc__offer_decline_tuple(b, cport, &lo2, &lo, &idx), 0);
	T_EQ(idx, cport);
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x79, 0), cport);
	T_EQ(word_tag(b, cport), 0x79);
	/* the acceptor of 127.0.0.2 closing: the offer is not its decline */
	sc__offer_undecline(b, cport, &lo2, &lo);
	T_EQ(sc__offer_state(b, cport, 0x79), SC_OFFER_OFFERED);
	T_ASSERT(sc__offer_withdraw(b, cport, 0x79));
	sc__offer_done(b, cport);

	/* a stale decline (written more than a second ago): left over from an
	 * older connection of the port, it refuses nothing */
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), 0);
	b->offers[cport].time_ms -= 1500;
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x7a, 0), cport);
	T_EQ(sc__offer_state(b, cport, 0x7a), SC_OFFER_OFFERED);
	/* and the acceptor that declined, closing, does not free it */
	sc__offer_undecline(b, idx, &lo, &lo);
	T_EQ(sc__offer_state(b, cport, 0x7a), SC_OFFER_OFFERED);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	T_EQ(t, 0x7a);
	sc__offer_done(b, cport);

	/* a decline while a live offer for this tuple is there: -EAGAIN */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x7b, 0), cport);
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), -EAGAIN);
	T_EQ(idx, -1);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	/* a decline while the entry is claimed (a live process's): left alone */
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), 0);
	T_EQ(idx, -1);
	T_EQ(sc__offer_state(b, cport, 0x7b), SC_OFFER_CLAIMED);
	sc__offer_done(b, cport);
	/* a post while another live offer holds the entry: -EBUSY */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x7c, 0), cport);
	T_EQ(sc__offer_post(b, cport, &lo, &lo2, 0, 0x7d, 0), -EBUSY);
	T_EQ(word_tag(b, cport), 0x7c);
	T_ASSERT(sc__offer_withdraw(b, cport, 0x7c));
	sc__offer_done(b, cport);

	/* an entry BUSY under a live pid for good (a writer stopped between
	 * its take and its fill, or a peer's scribble: fuzz_board's
	 * corpus/board/busy_live_writer): the decline gives up on it within
	 * its bound, as another's (before: accept() hung for ever) */
	atomic_store(&b->offers[cport].word, SC_OFFER_WORD(sc__self(), SC_OFFER_BUSY));
	uint64_t t0 = t_now_ms();
	T_EQ(sc__offer_decline_tuple(b, cport, &lo, &lo, &idx), 0);
	T_EQ(idx, -1);
	T_ASSERTF(t_now_ms() - t0 < 1000, "%llu ms", (unsigned long long)(t_now_ms() - t0));
	T_EQ(word_state(b, cport), SC_OFFER_BUSY);
	/* the client side alike: no post into it */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x7e, 0), -EBUSY);
	sc__offer_done(b, cport);
}

static void tags(struct sc_board *b)
{
	struct sc_addr16 lo = addr4("127.0.0.1");
	uint16_t cport = 40003;
	uint64_t a = 0xaaaa01, other = 0xbbbb02, c = 0xcccc03, t;
	uint64_t pid;

	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, a, 0), cport);
	/* another offer's tag changes nothing */
	T_ASSERT(!sc__offer_withdraw(b, cport, other));
	T_EQ(sc__offer_state(b, cport, a), SC_OFFER_OFFERED);
	/* to the holder of another tag the entry has moved on: "claimed and
	 * done with" */
	T_EQ(sc__offer_state(b, cport, other), SC_OFFER_CLAIMED);
	T_EQ(sc__offer_claimer(b, cport, other), 0);
	T_EQ(sc__offer_claimer(b, cport, a), 0);        /* not claimed yet */
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	T_EQ(t, a);
	T_EQ(pid, sc__self());
	T_EQ(sc__offer_claimer(b, cport, a), sc__self());
	T_EQ(sc__offer_claimer(b, cport, other), 0);
	T_ASSERT(!sc__offer_withdraw(b, cport, a));     /* claimed: too late */
	sc__offer_done(b, cport);
	T_EQ(sc__offer_claimer(b, cport, a), 0);
	T_EQ(sc__offer_state(b, cport, a), SC_OFFER_CLAIMED);   /* done with */

	/* the entry reused by the next connection of the port: the old tag's
	 * transitions miss it */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, c, 0), cport);
	T_ASSERT(!sc__offer_withdraw(b, cport, a));
	T_EQ(sc__offer_state(b, cport, c), SC_OFFER_OFFERED);
	T_ASSERT(sc__offer_withdraw(b, cport, c));
	T_EQ(word_tag(b, cport), c);
	sc__offer_done(b, cport);
}

/* An offer names its whole connection: an acceptor whose connection comes
 * from another client address, or whose SYN carried another tag, or (on
 * loopback) from another network namespace, claims nothing (issue 22: two
 * clients with one source port in two namespaces had their bytes
 * swapped), and the client's own connection still claims it. */
static void pairing(struct sc_board *b)
{
	struct sc_addr16 srv = addr4("10.0.0.1"), a = addr4("10.0.0.2"), c = addr4("10.0.0.3"),
			 lo = addr4("127.0.0.1");
	uint16_t cport = 40004;
	uint64_t who, t;
	int idx;

	T_EQ(sc__offer_post(b, cport, &a, &srv, 200, 0x99, 0), cport);
	/* the other client's connection, same port: not its offer */
	T_EQ(sc__offer_claim(b, cport, &srv, &c, 200, &who, &t), -1);
	T_EQ(sc__offer_claim(b, cport, &srv, &c, 0, &who, &t), -1);
	T_ASSERT(!sc__offer_withdrawn(b, cport, &srv, &c));
	/* its decline of its own connection leaves the offer alone */
	T_EQ(sc__offer_decline_tuple(b, cport, &srv, &c, &idx), 0);
	T_EQ(idx, -1);
	/* the client's address through another server address: not either */
	T_EQ(sc__offer_claim(b, cport, &lo, &a, 200, &who, &t), -1);
	/* its address but another SYN tag: another connection */
	T_EQ(sc__offer_claim(b, cport, &srv, &a, 150, &who, &t), -1);
	T_EQ(sc__offer_state(b, cport, 0x99), SC_OFFER_OFFERED);
	/* its own connection: claimed */
	T_EQ(sc__offer_claim(b, cport, &srv, &a, 200, &who, &t), cport);
	T_EQ(t, 0x99);
	T_EQ(who, sc__self());
	sc__offer_done(b, cport);
	/* an unmarked SYN (sent again after connect() put the program's TTL
	 * back) is claimed by the addresses alone */
	T_EQ(sc__offer_post(b, cport, &a, &srv, 200, 0x9a, 0), cport);
	T_EQ(sc__offer_claim(b, cport, &srv, &a, 0, &who, &t), cport);
	sc__offer_done(b, cport);
	/* a decline of the other client's connection refuses nothing to
	 * this one's late offer */
	T_EQ(sc__offer_decline_tuple(b, cport, &srv, &c, &idx), 0);
	T_EQ(idx, cport);
	T_EQ(sc__offer_post(b, cport, &a, &srv, 200, 0x9b, 0), cport);
	T_ASSERT(sc__offer_withdraw(b, cport, 0x9b));
	sc__offer_done(b, cport);
	/* loopback from another network namespace is another host */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, 0x9c, 0), cport);
	b->offers[cport].netns ^= 1;
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &who, &t), -1);
	b->offers[cport].netns ^= 1;
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &who, &t), cport);
	sc__offer_done(b, cport);
}

/* ---- connecting slots ---------------------------------------------------------- */

static void connecting(struct sc_board *b)
{
	int slots[SC_BOARD_CONNECTING];

	T_ASSERT(!sc__board_anyone_connecting(b));
	for (int i = 0; i < SC_BOARD_CONNECTING; i++) {
		slots[i] = sc__board_connecting(b);
		T_ASSERT(slots[i] >= 0 && slots[i] < SC_BOARD_CONNECTING);
		for (int k = 0; k < i; k++)
			T_ASSERT(slots[k] != slots[i]);
		T_ASSERT(sc__board_anyone_connecting(b));
	}
	T_EQ(sc__board_connecting(b), -1);              /* all taken */
	/* a freed slot is taken again */
	sc__board_connected(b, slots[7]);
	T_EQ(sc__board_connecting(b), slots[7]);
	/* a slot older than a second is another client's to take */
	atomic_fetch_sub(&b->connecting[slots[3]].word, 1500ull << 32);
	T_EQ(sc__board_connecting(b), slots[3]);
	T_EQ(sc__board_connecting(b), -1);
	/* one taken after the taker read the clock (its time later than
	 * the taker's now) is not stale, nor is one a reader sees so */
	sc__board_connected(b, slots[3]);
	T_EQ(sc__board_connecting(b), slots[3]);
	atomic_fetch_add(&b->connecting[slots[3]].word, 50ull << 32);
	T_EQ(sc__board_connecting(b), -1);
	for (int i = 0; i < SC_BOARD_CONNECTING; i++)
		if (i != slots[3])
			sc__board_connected(b, slots[i]);
	T_ASSERT(sc__board_anyone_connecting(b));
	for (int i = 0; i < SC_BOARD_CONNECTING; i++)
		if (i != slots[3])
			T_EQ(sc__board_connecting(b), slots[i]);
	/* freeing a slot another process has taken over does nothing */
	uint64_t mine = atomic_load(&b->connecting[slots[5]].word);
	atomic_store(&b->connecting[slots[5]].word, (mine & ~0xffffffffull) | 2);  /* (ours are odd) */
	sc__board_connected(b, slots[5]);
	T_EQ(atomic_load(&b->connecting[slots[5]].word), (mine & ~0xffffffffull) | 2);
	atomic_store(&b->connecting[slots[5]].word, mine);
	/* out of range: ignored */
	sc__board_connected(b, -1);
	sc__board_connected(b, SC_BOARD_CONNECTING);
	for (int i = 0; i < SC_BOARD_CONNECTING; i++)
		sc__board_connected(b, slots[i]);
	T_ASSERT(!sc__board_anyone_connecting(b));
	for (int i = 0; i < SC_BOARD_CONNECTING; i++)
		T_EQ((uint32_t)atomic_load(&b->connecting[i].word), 0);
	/* a client connecting for longer than 200 ms (descheduled) is
	 * waited for; one for longer than a second (stopped) is not */
	int s = sc__board_connecting(b);
	T_ASSERT(s >= 0);
	T_ASSERT(sc__board_anyone_connecting(b));
	atomic_fetch_sub(&b->connecting[s].word, 300ull << 32);
	T_ASSERT(sc__board_anyone_connecting(b));
	atomic_fetch_sub(&b->connecting[s].word, 900ull << 32);
	T_ASSERT(!sc__board_anyone_connecting(b));
	sc__board_connected(b, s);
}

/* ---- listener entries ------------------------------------------------------------ */

static int pipe_fds[2], back_fds[2];

static int listening_child(void *arg)
{
	struct sc_board *b = sc__board(*(uint16_t *)arg, true);
	struct sc_addr16 lo = addr4("127.0.0.1");
	char c = 'l';
	T_ASSERT(b);
	T_EQ(sc__board_listen(b, &lo, 777, false), 0);
	t_write_full(pipe_fds[1], &c, 1);
	t_read_full(back_fds[0], &c, 1);        /* until killed */
	return 1;
}

static void listeners(void)
{
	uint16_t port = 1001, port2 = 1002;
	struct sc_board *b = sc__board(port, true);
	struct sc_addr16 lo = addr4("127.0.0.1"), lo2 = addr4("127.0.0.2"),
			 other = addr4("10.11.12.13"), any = addr4("0.0.0.0");

	T_ASSERT(b);
	T_ASSERT(sc__board(port, false) == b);
	T_ASSERT(!sc__board_serves(b, &lo));
	T_EQ(sc__board_listen(b, &lo, 1234, false), 0);
	T_ASSERT(sc__board_serves(b, &lo));
	T_ASSERT(!sc__board_serves(b, &lo2));
	T_ASSERT(!sc__board_serves(b, &other));
	/* listening again on the same socket takes no second entry */
	T_EQ(sc__board_listen(b, &lo, 1234, false), 0);
	int n = 0;
	for (int i = 0; i < SC_BOARD_LISTENERS; i++)
		n += atomic_load(&b->listeners[i].owner) == sc__self();
	T_EQ(n, 1);
	sc__board_unlisten(b, 1234);
	T_ASSERT(!sc__board_serves(b, &lo));
	/* unlisten of a socket we do not have: nothing */
	sc__board_unlisten(b, 99);

	/* a wildcard listener serves every loopback address */
	T_EQ(sc__board_listen(b, &any, 1235, false), 0);
	T_ASSERT(sc__board_serves(b, &lo));
	T_ASSERT(sc__board_serves(b, &lo2));
	T_ASSERT(!sc__board_serves(b, &other));
	sc__board_unlisten(b, 1235);
	T_ASSERT(!sc__board_serves(b, &lo));

	/* every entry taken: -ENOSPC, and the entries are ours to free */
	for (int i = 0; i < SC_BOARD_LISTENERS; i++)
		T_EQ(sc__board_listen(b, &lo, 2000 + (uint64_t)i, false), 0);
	T_EQ(sc__board_listen(b, &lo, 3000, false), -ENOSPC);
	for (int i = 0; i < SC_BOARD_LISTENERS; i++)
		sc__board_unlisten(b, 2000 + (uint64_t)i);
	T_ASSERT(!sc__board_serves(b, &lo));

	/* deferred accepts: set at listen, or later; only for the addresses
	 * the listener serves; gone with its entry */
	T_ASSERT(!sc__board_defers(b, &lo));
	T_EQ(sc__board_listen(b, &lo, 1236, true), 0);
	T_EQ(sc__board_listen(b, &any, 1237, false), 0);
	T_ASSERT(sc__board_defers(b, &lo));
	T_ASSERT(!sc__board_defers(b, &lo2));   /* served by the wildcard only */
	sc__board_defer(b, 1236, false);
	T_ASSERT(!sc__board_defers(b, &lo));
	sc__board_defer(b, 1237, true);
	T_ASSERT(sc__board_defers(b, &lo) && sc__board_defers(b, &lo2));
	T_ASSERT(!sc__board_defers(b, &other));
	sc__board_unlisten(b, 1237);
	T_ASSERT(!sc__board_defers(b, &lo) && !sc__board_defers(b, &lo2));
	sc__board_unlisten(b, 1236);

	/* another process's entry lives while the process does (its OFD lock),
	 * zombie or not */
	struct sc_board *b2 = sc__board(port2, true);
	T_ASSERT(b2);
	T_ASSERT(pipe(pipe_fds) == 0 && pipe(back_fds) == 0);
	pid_t kid = t_fork(listening_child, &port2);
	char c;
	t_read_full(pipe_fds[0], &c, 1);
	T_ASSERT(sc__board_serves(b2, &lo));
	T_ASSERT(kill(kid, SIGKILL) == 0);
	/* dead, not yet reaped: its entry goes as its descriptions are closed
	 * (the last of its threads gone; a hang guard, not a deadline) */
	uint64_t t0 = t_now_ms();
	while (sc__board_serves(b2, &lo)) {
		T_ASSERTF(t_now_ms() - t0 < 10000, "served 10 s after SIGKILL (child state %c)",
			  t_state_of(kid, kid));
		t_sleep_ms(1);
	}
	T_ASSERT(t_state_of(kid, kid) == 'Z');      /* not reaped yet */
	t_wait_status(kid);
	/* its entry is free to take */
	T_EQ(sc__board_listen(b2, &lo, 4000, false), 0);
	T_ASSERT(sc__board_serves(b2, &lo));
	sc__board_unlisten(b2, 4000);

	/* a worker forked with the listener: the parent writes its entry at
	 * the fork (prereg, the parent's, live while the parent is: it stays
	 * when the parent lets go of its own), the child takes it over under
	 * its own identity, locked; killed, the child's entry dies with it */
	T_EQ(sc__board_listen(b2, &lo, 5000, false), 0);
	T_ASSERT(pipe(pipe_fds) == 0 && pipe(back_fds) == 0);
	uint64_t parent = sc__self();
	kid = fork();
	T_ASSERT(kid >= 0);
	if (kid == 0) {
		sc__proc_atfork_child();
		sc__board_atfork_child();
		c = sc__board_listen_inherit(b2, 5000, parent, getpid(), true) == 0 ? 'k' : 'x';
		t_write_full(pipe_fds[1], &c, 1);
		t_read_full(back_fds[0], &c, 1);        /* until killed */
		_exit(0);
	}
	/* (either side may come first: this one, if the child has not yet,
	 * writes the entry the child then takes over) */
	T_EQ(sc__board_listen_inherit(b2, 5000, parent, kid, false), 0);
	t_read_full(pipe_fds[0], &c, 1);
	T_EQ(c, 'k');
	sc__board_unlisten(b2, 5000);           /* the parent lets go of its own */
	T_ASSERT(sc__board_serves(b2, &lo));    /* the child's serves */
	int mine = 0, kids = 0;
	for (int i = 0; i < SC_BOARD_LISTENERS; i++) {
		struct sc_board_listener *l = &b2->listeners[i];
		uint64_t o = atomic_load(&l->owner);
		if (!o || l->sock_ino != 5000)
			continue;
		mine += o == parent;
		kids += o != parent && l->kid == kid && !atomic_load(&l->prereg);
	}
	T_EQ(mine, 0);
	T_EQ(kids, 1);
	T_ASSERT(kill(kid, SIGKILL) == 0);
	t0 = t_now_ms();
	while (sc__board_serves(b2, &lo)) {
		T_ASSERTF(t_now_ms() - t0 < 10000, "a killed worker%s entry served 10 s on", "'s");
		t_sleep_ms(1);
	}
	t_wait_status(kid);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	close(back_fds[0]);
	close(back_fds[1]);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	close(back_fds[0]);
	close(back_fds[1]);
}

/* ---- early bytes and the lead byte ------------------------------------------ */

static void early(struct sc_board *b)
{
	struct sc_addr16 lo = addr4("127.0.0.1");
	uint16_t cport = 40010;
	uint64_t tag = 0x4455667, t;
	uint64_t pid;
	uint32_t len;
	bool lead;
	uint8_t buf[SC_EARLY_MAX + 8];
	const uint8_t *d;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	/* no lead: up to SC_EARLY_MAX bytes, appended at the published length */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag, 0), cport);
	T_EQ(sc__offer_early(b, cport, tag, 0, buf, 10), 10);
	T_EQ(sc__offer_early(b, cport, tag, 5, buf, 10), 0);    /* not at the end */
	T_EQ(sc__offer_early(b, cport, tag, 10, buf + 10, sizeof(buf)), SC_EARLY_MAX - 10);
	T_ASSERT(!sc__offer_lead(b, cport, tag));      /* published already */
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	d = sc__offer_early_take(b, cport, &len, &lead);
	T_EQ(len, SC_EARLY_MAX);
	T_ASSERT(!lead && !memcmp(d, buf, len));
	sc__offer_done(b, cport);

	/* a lead byte: committed before anything is published, then at most
	 * SC_EARLY_MAX - 1 bytes after it */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag + 1, 0), cport);
	T_ASSERT(!sc__offer_lead(b, cport, tag));      /* another offer's tag */
	T_ASSERT(sc__offer_lead(b, cport, tag + 1));
	T_ASSERT(!sc__offer_lead(b, cport, tag + 1));  /* once */
	T_EQ(sc__offer_early(b, cport, tag + 1, 0, buf + 1, sizeof(buf)), SC_EARLY_MAX - 1);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	T_EQ(sc__offer_early(b, cport, tag + 1, SC_EARLY_MAX - 1, buf, 1), 0);
	d = sc__offer_early_take(b, cport, &len, &lead);
	T_ASSERT(lead);
	T_EQ(len, SC_EARLY_MAX - 1);
	T_ASSERT(!memcmp(d, buf + 1, len));
	sc__offer_done(b, cport);

	/* sealed first: no lead, nothing published after */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag + 2, 0), cport);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	sc__offer_early_take(b, cport, &len, &lead);
	T_ASSERT(!lead && len == 0);
	T_ASSERT(!sc__offer_lead(b, cport, tag + 2));
	T_EQ(sc__offer_early(b, cport, tag + 2, 0, buf, 1), 0);
	sc__offer_done(b, cport);

	/* a new offer starts with nothing: no lead, no length, not sealed */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag + 3, 0), cport);
	T_ASSERT(sc__offer_lead(b, cport, tag + 3));
	T_ASSERT(sc__offer_withdraw(b, cport, tag + 3));

	/* a scribbled length is none */
	T_EQ(sc__offer_post(b, cport, &lo, &lo, 0, tag + 4, 0), cport);
	atomic_store(&b->early[cport].len, SC_EARLY_LEAD | SC_EARLY_MAX);
	T_EQ(sc__offer_claim(b, cport, &lo, &lo, 0, &pid, &t), cport);
	sc__offer_early_take(b, cport, &len, &lead);
	T_ASSERT(lead && len == 0);
	sc__offer_done(b, cport);
}

/* lead vs seal, raced: the client commits its lead byte and publishes 10
 * bytes after it, or finds it sealed; the acceptor claims and seals. */
static struct {
	struct sc_board *b;
	long rounds;
	pthread_barrier_t start, end;
	struct sc_addr16 local;
	uint16_t cport;
	uint64_t tag;
	bool led, lead;
	size_t published;
	uint32_t len;
} lr;
static const uint8_t lr_bytes[16] = "0123456789abcdef";

static void *lead_client(void *arg)
{
	(void)arg;
	for (long i = 0; i < lr.rounds; i++) {
		pthread_barrier_wait(&lr.start);
		lr.led = sc__offer_lead(lr.b, lr.cport, lr.tag);
		lr.published = lr.led ? sc__offer_early(lr.b, lr.cport, lr.tag, 0, lr_bytes, 10) : 0;
		pthread_barrier_wait(&lr.end);
		pthread_barrier_wait(&lr.end);
	}
	return NULL;
}

static void *lead_acceptor(void *arg)
{
	(void)arg;
	for (long i = 0; i < lr.rounds; i++) {
		uint64_t pid;
		uint64_t t;
		pthread_barrier_wait(&lr.start);
		T_EQ(sc__offer_claim(lr.b, lr.cport, &lr.local, &lr.local, 0, &pid, &t), lr.cport);
		const uint8_t *d = sc__offer_early_take(lr.b, lr.cport, &lr.len, &lr.lead);
		T_ASSERT(!memcmp(d, lr_bytes, lr.len));
		pthread_barrier_wait(&lr.end);
		pthread_barrier_wait(&lr.end);
	}
	return NULL;
}

static void lead_race(struct sc_board *b)
{
	long n_lead = 0, n_sealed = 0;
	pthread_t tc, ta;

	lr.b = b;
	lr.rounds = (long)t_scale(20000, 2000);
	lr.local = addr4("127.0.0.1");
	T_ASSERT(pthread_barrier_init(&lr.start, NULL, 3) == 0);
	T_ASSERT(pthread_barrier_init(&lr.end, NULL, 3) == 0);
	T_ASSERT(pthread_create(&tc, NULL, lead_client, NULL) == 0);
	T_ASSERT(pthread_create(&ta, NULL, lead_acceptor, NULL) == 0);
	for (long i = 0; i < lr.rounds; i++) {
		lr.cport = (uint16_t)(20000 + i % 4096);
		lr.tag = (uint64_t)(i + 1) << 8 & SC_TAG_MASK;
		T_EQ(sc__offer_post(b, lr.cport, &lr.local, &lr.local, 0, lr.tag, 0), lr.cport);
		pthread_barrier_wait(&lr.start);
		pthread_barrier_wait(&lr.end);
		/* the client's lead is the claimer's, and so is every byte
		 * it counted as published */
		T_EQ(lr.lead, lr.led);
		T_EQ(lr.len, (uint32_t)lr.published);
		if (lr.led)
			n_lead++;
		else
			n_sealed++;
		sc__offer_done(b, lr.cport);
		pthread_barrier_wait(&lr.end);
	}
	pthread_join(tc, NULL);
	pthread_join(ta, NULL);
	pthread_barrier_destroy(&lr.start);
	pthread_barrier_destroy(&lr.end);
	t_log("lead vs seal: %ld rounds: lead byte %ld, sealed first %ld", lr.rounds, n_lead,
	      n_sealed);
}

/* ---- the mappings ------------------------------------------------------------ */

/* How many boards this process has mapped; *has: whether port's is one. */
static int boards_mapped(int port, bool *has)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], name[32];
	int n = 0;

	T_ASSERT(f);
	snprintf(name, sizeof(name), "/tcp-v%u-%d\n", SC_BOARD_VERSION, port);
	if (has)
		*has = false;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "/tcp-v"))
			continue;
		n++;
		if (has && strstr(line, name))
			*has = true;
	}
	fclose(f);
	return n;
}

/* look port's board up, read it, let it go */
static void meet(int port)
{
	struct sc_board *b = sc__board((uint16_t)port, true);
	T_ASSERT(b);
	T_EQ(atomic_load((_Atomic uint32_t *)&b->port), (uint32_t)port);
	sc__board_put((uint16_t)port);
}

#define CHURN_PORTS (2 * SC_BOARD_CACHE)

static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < 1000; i++)
		meet(40000 + (int)(rand_r(&seed) % CHURN_PORTS));
	return NULL;
}

static void bounded(void)
{
	int n;
	bool has;

	/* many ports met, each let go at once */
	for (int p = 0; p < 4 * SC_BOARD_CACHE; p++)
		meet(20000 + p);
	n = boards_mapped(-1, NULL);
	T_ASSERTF(n <= SC_BOARD_CACHE, "%d boards mapped after meeting %d ports", n,
		  4 * SC_BOARD_CACHE);

	/* the least recently looked up goes: one looked up between every
	 * new mapping stays mapped, one met once early does not */
	meet(21000);
	for (int p = 0; p < 2 * SC_BOARD_CACHE; p++) {
		meet(22000);
		meet(23000 + p);
		boards_mapped(22000, &has);
		T_ASSERTF(has, "the hot board unmapped after %d others", p + 1);
	}
	boards_mapped(21000, &has);
	T_ASSERT(!has);

	/* held boards stay, more of them than the cache, while others come
	 * and go; let go, they go too */
	enum { HELD = SC_BOARD_CACHE + 8 };
	struct sc_board *held[HELD];
	for (int i = 0; i < HELD; i++)
		T_ASSERT((held[i] = sc__board((uint16_t)(24000 + i), true)));
	for (int p = 0; p < 2 * SC_BOARD_CACHE; p++)
		meet(25000 + p);
	n = boards_mapped(-1, NULL);
	T_ASSERTF(n >= HELD && n <= HELD + 4, "%d boards mapped, %d held", n, HELD);
	for (int i = 0; i < HELD; i++) {
		T_EQ(held[i]->port, (uint32_t)(24000 + i));
		sc__board_put((uint16_t)(24000 + i));
	}
	meet(26000);
	n = boards_mapped(-1, NULL);
	T_ASSERTF(n <= SC_BOARD_CACHE, "%d boards mapped once let go", n);

	/* threads: look-ups racing the unmapping of the boards they want */
	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		T_ASSERT(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	n = boards_mapped(-1, NULL);
	T_ASSERTF(n <= SC_BOARD_CACHE, "%d boards mapped after the threads", n);
}

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", rundir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", rundir);
}

/* The ports map (ports.c): a port nobody listened on has no board, and a
 * look-up makes none (no file, nothing mapped); making a board sets its
 * port's bit first, in the shared file, which every process sees. */
static void ports_map(void)
{
	char path[PATH_MAX];
	struct stat st;
	T_ASSERT(!sc__port_listened(2000));
	T_ASSERT(sc__board(2000, false) == NULL);
	snprintf(path, sizeof(path), "%s/tcp-v%u-2000", rundir, SC_BOARD_VERSION);
	T_ASSERT(stat(path, &st) < 0 && errno == ENOENT);
	struct sc_board *b = sc__board(2000, true);
	T_ASSERT(b);
	T_ASSERT(sc__port_listened(2000));
	T_ASSERT(!sc__port_listened(1999) && !sc__port_listened(2001));
	sc__board_put(2000);
	T_ASSERT(sc__port_listened(1000));      /* (main's board) */
	/* the bit is in the shared file: a look from its own mapping */
	snprintf(path, sizeof(path), "%s/" SC_PORTS_FILE, rundir);
	int fd = open(path, O_RDONLY);
	T_ASSERT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 65536 / 8);
	uint8_t *m = mmap(NULL, 65536 / 8, PROT_READ, MAP_SHARED, fd, 0);
	T_ASSERT(m != MAP_FAILED);
	T_EQ(m[2000 / 8] >> (2000 % 8) & 1, 1);
	T_EQ(m[1999 / 8] >> (1999 % 8) & 1, 0);
	munmap(m, 65536 / 8);
	close(fd);
	t_log("ports map: ok");
}

/* every scenario: a run directory of our own, removed at exit, and port
 * 1000's board, which this process keeps */
static struct sc_board *board;

static void setup(void)
{
	if (!mkdtemp(rundir))
		T_FAIL("mkdtemp: %s", strerror(errno));
	setenv("SHORTCUT_RUNDIR", rundir, 1);
	atexit(cleanup);
	T_ASSERT(sc__rundir() && !strcmp(sc__rundir(), rundir));

	board = sc__board(1000, true);
	T_ASSERT(board);
	T_EQ(board->magic, SC_BOARD_MAGIC);
	T_EQ(board->version, SC_BOARD_VERSION);
	T_EQ(board->port, 1000);
}

T_TEST(withdrawn) { withdrawn(board); }
T_TEST(declines) { declines(board); }
T_TEST(tags) { tags(board); }
T_TEST(pairing) { pairing(board); }
T_TEST(connecting) { connecting(board); }
T_TEST(listeners) { listeners(); }
T_TEST(race_post_decline) { race(board, R_POST_DECLINE, "post vs claim/decline"); }
T_TEST(race_withdraw_claim) { race(board, R_WITHDRAW_CLAIM, "withdraw vs claim"); }
T_TEST(race_claim_claim) { race(board, R_CLAIM_CLAIM, "claim vs claim"); }
T_TEST(early) { early(board); }
T_TEST(lead_race) { lead_race(board); }
T_TEST(bounded) { bounded(); }
T_TEST(ports_map) { ports_map(); }

T_MAIN(setup,
       T_ENTRY(withdrawn),
       T_ENTRY(declines),
       T_ENTRY(tags),
       T_ENTRY(pairing),
       T_ENTRY(connecting),
       T_ENTRY(listeners),
       T_ENTRY(race_post_decline),
       T_ENTRY(race_withdraw_claim),
       T_ENTRY(race_claim_claim),
       T_ENTRY(early),
       T_ENTRY(lead_race),
       T_ENTRY(bounded),
       T_ENTRY(ports_map))
