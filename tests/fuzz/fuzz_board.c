/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the offer board a peer of the same user can write
 * (issue 15).  The board is the real one (sc__board: a file of a private
 * run directory, mapped shared); the input is a program of operations, some
 * of them the peer rewriting any word of the header, the listener and
 * connecting entries or four offer entries and their early bytes' words
 * (pids, tags, states, addresses, counts, times, lengths, the deferred
 * flag), the others our calls on it as a client (connecting slot, serves,
 * defers, post, early bytes, lead byte, state, claimer, withdraw) and as
 * the accepting side (listen, defer, unlisten, fork inheritance, claim and
 * its early bytes, withdrawn, decline, undecline, done).  Whatever it writes: no access outside the board
 * (ASan), no hang (libFuzzer's -timeout), answers within their ranges.
 *
 *     make fuzz FUZZ_SECONDS=600        (tests/fuzz.sh; seeds in corpus/board)
 *
 * Built with: src/rundir
 */
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rundir.h"

#define PORT 4242

static char dir[64] = "/tmp/sc-fuzz-board-XXXXXX";
static struct sc_board *b;
/* the identities a peer is likeliest to write: nobody, us, a small
 * number, a dead process's, another slot's, nonsense (over 56 bits, all
 * ones, the mask) */
static uint64_t ids[8] = { 0, 0, 1, 0, 0, ~0ull, 1ull << 56, SC_PROC_ID_MASK };
static const uint16_t cports[4] = { 0, 1, 40000, 65535 };
static struct sc_addr16 addrs[4];

static volatile uint8_t sink;   /* what the harness reads, read */

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "fuzz_board: %s\n", #x); abort(); } } while (0)

static uint64_t take64(const uint8_t **d, size_t *n)
{
	uint64_t v = 0;
	size_t k = *n < 8 ? *n : 8;
	memcpy(&v, *d, k);
	*d += k;
	*n -= k;
	return v;
}

static uint8_t take8(const uint8_t **d, size_t *n)
{
	uint8_t v = 0;
	if (*n) {
		v = **d;
		(*d)++;
		(*n)--;
	}
	return v;
}

static void cleanup(void)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	while (dp && (e = readdir(dp)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(dp), e->d_name, 0);
	if (dp)
		closedir(dp);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	if (!mkdtemp(dir))
		abort();
	setenv("SHORTCUT_RUNDIR", dir, 1);
	atexit(cleanup);
	b = sc__board(PORT, true);
	if (!b)
		abort();
	int p[2];
	if (pipe(p) < 0)
		abort();
	ids[1] = sc__self();
	pid_t kid = fork();
	if (kid == 0) {
		sc__proc_atfork_child();
		uint64_t id = sc__self();
		_exit(write(p[1], &id, sizeof(id)) == sizeof(id) ? 0 : 1);
	}
	if (read(p[0], &ids[3], sizeof(ids[3])) != sizeof(ids[3]))
		abort();
	waitpid(kid, NULL, 0);
	close(p[0]);
	close(p[1]);
	ids[4] = ids[1] ^ 1;
	static const uint8_t lo4[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	static const uint8_t lo4b[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 2 };
	static const uint8_t any4[16] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t lo6[16] = { [15] = 1 };
	memcpy(addrs[0].b, lo4, 16);
	memcpy(addrs[1].b, lo4b, 16);
	memcpy(addrs[2].b, any4, 16);
	memcpy(addrs[3].b, lo6, 16);
	return 0;
}

/* A word the peer can write: one of the four offers or the first word of
 * their early bytes (length, pad) (k odd), or of the header and its
 * entries. */
static uint64_t *peer_word(uint32_t k)
{
	const uint32_t head = offsetof(struct sc_board, offers) / 8;
	const uint32_t per = sizeof(struct sc_offer) / 8;
	if (!(k & 1))
		return (uint64_t *)b + (k >> 1) % head;
	k = (k >> 1) % (4 * per + 4);
	if (k >= 4 * per)
		return (uint64_t *)&b->early[cports[k - 4 * per]];
	return (uint64_t *)&b->offers[cports[k / per]] + k % per;
}

/* Back to a fresh board: what the inputs can touch, and our locks (the
 * descriptions that hold them closed, as in a fork child). */
static void reset(void)
{
	memset((char *)b + 16, 0, offsetof(struct sc_board, offers) - 16);
	for (int i = 0; i < 4; i++) {
		memset(&b->offers[cports[i]], 0, sizeof(b->offers[0]));
		memset(&b->early[cports[i]], 0, sizeof(b->early[0]));
	}
	b->magic = SC_BOARD_MAGIC;
	b->version = SC_BOARD_VERSION;
	b->port = PORT;
	b->pad = 0;
	sc__board_atfork_child();
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	/* a client's offer of ours, as the interposer keeps it */
	int offer = -1, slot = -1;
	uint64_t tag = 0;

	reset();
	while (n) {
		uint8_t op = take8(&d, &n), a = take8(&d, &n);
		uint16_t cport = cports[a & 3];
		const struct sc_addr16 *addr = &addrs[(a >> 2) & 3];
		const struct sc_addr16 *src = &addrs[(op >> 4) & 3];   /* the client's */
		uint8_t ttl = op & 0x80 ? 200 : 0;
		uint64_t ino = 1 + (a >> 4 & 3);
		int32_t idx2;
		uint64_t tag2, who;
		int rc;

		switch (op & 15) {
		default: /* the peer writes a word: anything */
			*peer_word((uint32_t)take64(&d, &n)) = take64(&d, &n);
			break;
		case 1: { /* ... an identity, a state and a tag, a small count */
			uint64_t *w = peer_word((uint32_t)take64(&d, &n));
			uint64_t v = take8(&d, &n);
			if (op & 0x80)
				v = SC_OFFER_WORD(a & 0x40 ? ids[v >> 3 & 7] : tag, v & 7);
			else if (op & 0x40)
				v = ids[v & 7];
			*w = v;
			break;
		}
		case 2:
			CHECK(sc__board_listen(b, addr, ino, a & 0x40) <= 0);
			break;
		case 3:
			if (a & 0x40)
				sc__board_defer(b, ino, a & 0x80);
			else
				sc__board_unlisten(b, ino);
			break;
		case 4:
			rc = sc__board_listen_inherit(b, ino, ids[a & 7], (int32_t)(a >> 3), a & 0x80);
			CHECK(rc <= 0);
			break;
		case 5:
			sc__board_serves(b, addr);
			sc__board_defers(b, addr);
			break;
		case 6: /* a client: its slot, then its offer */
			if (slot < 0) {
				slot = sc__board_connecting(b);
				CHECK(slot >= -1 && slot < SC_BOARD_CONNECTING);
			} else {
				sc__board_connected(b, slot);
				slot = -1;
			}
			break;
		case 7:
			sc__board_anyone_connecting(b);
			break;
		case 8:
			if (offer >= 0)
				break;
			tag = take64(&d, &n) & SC_TAG_MASK;
			tag += !tag;
			offer = sc__offer_post(b, cport, src, addr, ttl, tag, 0);
			CHECK(offer == cport || offer == -EBUSY || offer == -ECONNREFUSED);
			break;
		case 9: /* the client looks at its offer, or withdraws it */
			if (offer < 0)
				break;
			CHECK(sc__offer_state(b, offer, tag) <= 0xff);
			sc__offer_claimer(b, offer, tag);
			if (a & 1) {
				sc__offer_withdraw(b, offer, tag);
				offer = -1;
			}
			break;
		case 10: /* the accepting side */
			if (sc__offer_withdrawn(b, cport, addr, src))
				break;
			rc = sc__offer_claim(b, cport, addr, src, ttl, &who, &tag2);
			CHECK(rc == -1 || rc == cport);
			if (rc >= 0 && (a & 0x40))
				sc__offer_done(b, rc);
			else if (rc >= 0)
				sc__offer_decline(b, rc, tag2);
			break;
		case 11:
			rc = sc__offer_decline_tuple(b, cport, addr, src, &idx2);
			CHECK(rc == -EAGAIN || rc == 0);
			CHECK(idx2 == -1 || idx2 == cport);
			if (idx2 >= 0 && (a & 0x40))
				sc__offer_undecline(b, idx2, addr, src);
			break;
		case 12: /* closing a connection it declined */
			sc__offer_undecline(b, cport, addr, src);
			break;
		case 13:
			sc__board_atfork_child();
			break;
		case 14: { /* the client: its first byte on TCP, or early bytes at some length */
			static const uint8_t bytes[SC_EARLY_MAX + 16];
			if (offer < 0)
				break;
			if (a & 1) {
				sc__offer_lead(b, offer, tag);
				break;
			}
			size_t len = take8(&d, &n) + (a & 2 ? 0 : 16);
			size_t k = sc__offer_early(b, offer, tag, take8(&d, &n), bytes, len);
			CHECK(k <= len && k <= SC_EARLY_MAX);
			break;
		}
		case 15: { /* the accepting side: a claim takes the early bytes */
			uint32_t len;
			bool lead;
			rc = sc__offer_claim(b, cport, addr, src, ttl, &who, &tag2);
			CHECK(rc == -1 || rc == cport);
			if (rc < 0)
				break;
			const uint8_t *e = sc__offer_early_take(b, rc, &len, &lead);
			CHECK(len <= SC_EARLY_MAX - lead);
			for (uint32_t i = 0; i < len; i++)
				sink += e[i];   /* (ASan: inside the board) */
			sc__offer_done(b, rc);
			break;
		}
		}
	}
	return 0;
}
