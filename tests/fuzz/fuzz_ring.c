/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the ring cursors a peer writes (issue 15).  Both ends'
 * private views of one ring share its header and data; the input is a
 * program of operations, some of them the hostile peer rewriting the
 * header's prod, cons or held between our producer's and consumer's calls.
 * Whatever it writes: no access outside the ring (ASan), a cursor accepted
 * only if valid, never more bytes readable than the ring holds nor more
 * room than the window, and a rejected cursor stays rejected for that view
 * (the caller's -EPROTO is sticky).
 *
 *     make fuzz FUZZ_SECONDS=600        (tests/fuzz.sh; seeds in corpus/ring)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define SIZE SC_RING_MIN

static uint64_t take64(const uint8_t **d, size_t *n)
{
	uint64_t v = 0;
	size_t k = *n < 8 ? *n : 8;
	memcpy(&v, *d, k);
	*d += k;
	*n -= k;
	return v;
}

static uint32_t take16(const uint8_t **d, size_t *n)
{
	return (uint32_t)(take64(d, n) & 0xffff);   /* (8 bytes consumed: simple) */
}

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "fuzz_ring: %s\n", #x); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct sc_ring_hdr h;
	uint8_t *data = malloc(SIZE);          /* exact size: ASan sees any overrun */
	static uint8_t src[SIZE], dst[SIZE];
	struct sc_ring tx, rx;
	bool rx_bad = false, tx_bad = false;

	memset(&h, 0, sizeof(h));
	sc__ring_init(&tx, &h, data, SIZE);
	sc__ring_init(&rx, &h, data, SIZE);
	while (n) {
		uint8_t op = *d++;
		n--;
		switch (op % 9) {
		case 0: /* the peer writes prod: a small step or anything */
			atomic_store(&h.prod, op & 0x80 ? take64(&d, &n) : rx.prod + take16(&d, &n));
			break;
		case 1:
			atomic_store(&h.cons, op & 0x80 ? take64(&d, &n) : tx.cons + take16(&d, &n));
			break;
		case 2:
			atomic_store(&h.held, op & 0x80 ? take64(&d, &n) : rx.prod + take16(&d, &n));
			break;
		case 3: { /* our consumer reads */
			if (rx_bad)
				break;
			size_t want = take16(&d, &n);
			int64_t av = sc__ring_avail(&rx);
			if (av < 0) {
				rx_bad = true;
				break;
			}
			CHECK((uint64_t)av <= SIZE);
			size_t k = (uint64_t)av < want ? (size_t)av : want;
			struct iovec iov = { dst, k };
			CHECK(sc__ring_get(&rx, &iov, 1, k, op & 0x80) == k);
			break;
		}
		case 4: { /* our producer writes */
			if (tx_bad)
				break;
			size_t want = take16(&d, &n) % (SIZE + 1);
			int64_t sp = sc__ring_space(&tx, want);
			if (sp < 0) {
				tx_bad = true;
				break;
			}
			CHECK((uint64_t)sp <= tx.win);
			size_t k = (uint64_t)sp < want ? (size_t)sp : want;
			struct iovec iov = { src, k };
			CHECK(sc__ring_put(&tx, &iov, 1, 0, k) == k);
			CHECK(tx.prod - tx.cons <= SIZE);
			if (op & 0x80)
				sc__ring_publish(&tx);
			else
				sc__ring_publish_to(&tx, tx.pub + (tx.prod - tx.pub) / 2);
			break;
		}
		case 5: /* the producer died: what it held is ours */
			sc__ring_take_held(&rx);
			break;
		case 6:
			if (!rx_bad)
				sc__ring_update_cons(&rx, op & 0x80);
			break;
		case 7: /* the peer sets tx_blocked, anything */
			atomic_store(&h.tx_blocked, (uint32_t)take16(&d, &n));
			break;
		case 8: /* a narrower window (sc_set_bufs) */
			tx.win = SC_RING_MIN / 4 + take16(&d, &n) % (SIZE - SC_RING_MIN / 4 + 1);
			break;
		}
		/* a view that accepted a cursor holds a consistent one */
		if (!rx_bad)
			CHECK(rx.prod - rx.cons <= SIZE);
		if (!tx_bad)
			CHECK(tx.prod - tx.cons <= SIZE);
	}
	free(data);
	return 0;
}
