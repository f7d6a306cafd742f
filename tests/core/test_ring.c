/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the ring and cursor rules (no second process): cursor
 * arithmetic, wrap-around, SMC's update threshold, and validation of hostile
 * cursor values.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "layout.h"
#include "ring.h"
#include "t_util.h"

static _Alignas(64) struct sc_ring_hdr hdr;
static uint8_t data[SC_RING_MIN];

static void test_threshold(void)
{
	t_log("update limit = max(size/10, 2304)");
	T_EQ(sc__update_limit(16384), 2304);
	T_EQ(sc__update_limit(23040), 2304);
	T_EQ(sc__update_limit(32768), 3276);
	T_EQ(sc__update_limit(1u << 20), 104857);
}

static void test_cursor_valid(void)
{
	t_log("cursor validation: monotonic, bounded, 64-bit wrap-safe");
	T_ASSERT(sc__cursor_valid(100, 100, 200));
	T_ASSERT(sc__cursor_valid(100, 200, 200));
	T_ASSERT(!sc__cursor_valid(100, 99, 200));      /* backwards */
	T_ASSERT(!sc__cursor_valid(100, 201, 200));     /* beyond */
	uint64_t near = UINT64_MAX - 10;
	T_ASSERT(sc__cursor_valid(near, near + 20, near + 30));   /* across 2^64 */
	T_ASSERT(!sc__cursor_valid(near, near - 1, near + 30));
	T_EQ(sc__ring_used(near + 20, near), 20);
}

/* Producer and consumer views of one ring in this process. */
static void test_wrap(uint64_t start)
{
	struct sc_ring p, c;
	uint8_t in[5000], out[5000];
	uint64_t wrote = 0, read = 0;
	struct t_rng rng;

	t_log("wrap-around with cursors starting at %#llx", (unsigned long long)start);
	memset(&hdr, 0, sizeof(hdr));
	sc__ring_init(&p, &hdr, data, sizeof(data));
	sc__ring_init(&c, &hdr, data, sizeof(data));
	p.prod = p.cons = c.prod = c.cons = c.cons_pub = start;
	atomic_store(&hdr.prod, start);
	atomic_store(&hdr.cons, start);
	t_rng_seed(&rng, t_seed());
	for (int round = 0; round < 20000; round++) {
		size_t n = t_rng_range(&rng, 1, sizeof(in));
		int64_t space = sc__ring_space(&p, n);
		T_ASSERT(space >= 0 && space <= (int64_t)sizeof(data));
		if ((uint64_t)space < n)
			n = (size_t)space;
		t_pat_fill(42, wrote - 0, in, n);
		struct iovec iv = { in, n };
		T_EQ(sc__ring_put(&p, &iv, 1, 0, n), n);
		wrote += n;
		sc__ring_publish(&p);

		int64_t av = sc__ring_avail(&c);
		T_EQ(av, (int64_t)(wrote - read));
		size_t m = t_rng_range(&rng, 1, sizeof(out));
		if ((uint64_t)av < m)
			m = (size_t)av;
		/* peek leaves the cursor alone */
		struct iovec ov = { out, m };
		T_EQ(sc__ring_get(&c, &ov, 1, m, true), m);
		T_EQ(c.cons, start + read);
		T_EQ(sc__ring_get(&c, &ov, 1, m, false), m);
		T_PAT_CHECK(42, read, out, m);
		read += m;
		sc__ring_update_cons(&c, false);
		/* lazy publication: never more than the limit unpublished */
		T_ASSERT(c.cons - atomic_load(&hdr.cons) < c.limit);
	}
	T_ASSERT(wrote > 10 * sizeof(data));
}

static void test_iov_skip(void)
{
	struct sc_ring p, c;
	char a[] = "hello ", b[] = "ring ", d[] = "world";
	struct iovec iv[3] = { { a, 6 }, { b, 5 }, { d, 5 } };
	char out[32] = { 0 };

	t_log("gather from an iovec array starting at an offset; scatter out");
	memset(&hdr, 0, sizeof(hdr));
	sc__ring_init(&p, &hdr, data, sizeof(data));
	sc__ring_init(&c, &hdr, data, sizeof(data));
	T_EQ(sc__ring_put(&p, iv, 3, 3, 100), 13);   /* "lo ring world" */
	sc__ring_publish(&p);
	T_EQ(sc__ring_avail(&c), 13);
	struct iovec ov[2] = { { out, 4 }, { out + 10, 20 } };
	T_EQ(sc__ring_get(&c, ov, 2, 13, false), 13);
	T_ASSERT(!memcmp(out, "lo r", 4));
	T_ASSERT(!memcmp(out + 10, "ing world", 9));
}

static void test_hostile(void)
{
	struct sc_ring p, c;

	t_log("hostile cursors are rejected with -EPROTO");
	memset(&hdr, 0, sizeof(hdr));
	sc__ring_init(&p, &hdr, data, sizeof(data));
	sc__ring_init(&c, &hdr, data, sizeof(data));
	/* producer claims more than the ring holds */
	atomic_store(&hdr.prod, sizeof(data) + 1);
	T_EQ(sc__ring_avail(&c), -EPROTO);
	/* producer cursor moving backwards */
	atomic_store(&hdr.prod, 100);
	T_EQ(sc__ring_avail(&c), 100);
	atomic_store(&hdr.prod, 50);
	T_EQ(sc__ring_avail(&c), -EPROTO);
	/* consumer cursor beyond what was produced */
	p.prod = sizeof(data);                  /* full, from the producer's view */
	atomic_store(&hdr.cons, sizeof(data) + 5);
	T_EQ(sc__ring_space(&p, 1), -EPROTO);
	/* consumer cursor moving backwards */
	p.cons = 100;
	atomic_store(&hdr.cons, 10);
	T_EQ(sc__ring_space(&p, sizeof(data)), -EPROTO);
	/* a valid advance is accepted */
	atomic_store(&hdr.cons, 4096);
	T_EQ(sc__ring_space(&p, sizeof(data)), 4096);
}

static void test_blocked_publishes(void)
{
	struct sc_ring p, c;
	uint8_t buf[64];

	t_log("write_blocked forces publication and a wake-up; the flag stays the producer's");
	memset(&hdr, 0, sizeof(hdr));
	sc__ring_init(&p, &hdr, data, sizeof(data));
	sc__ring_init(&c, &hdr, data, sizeof(data));
	struct iovec iv = { buf, sizeof(buf) };
	sc__ring_put(&p, &iv, 1, 0, sizeof(buf));
	sc__ring_publish(&p);
	T_EQ(sc__ring_avail(&c), 64);
	sc__ring_get(&c, &iv, 1, 10, false);
	T_ASSERT(!sc__ring_update_cons(&c, false));     /* 10 < limit: lazy */
	T_EQ(atomic_load(&hdr.cons), 0);
	atomic_store(&hdr.tx_blocked, 1);
	sc__ring_get(&c, &iv, 1, 10, false);
	T_ASSERT(sc__ring_update_cons(&c, false));      /* blocked: publish + wake */
	T_EQ(atomic_load(&hdr.cons), 20);
	T_EQ(atomic_load(&hdr.tx_blocked), 1);          /* only its owner clears it */
	sc__ring_get(&c, &iv, 1, 5, false);
	T_ASSERT(sc__ring_update_cons(&c, false));      /* still blocked: every read */
	T_EQ(atomic_load(&hdr.cons), 25);
	atomic_store(&hdr.tx_blocked, 0);               /* the producer stopped waiting */
	sc__ring_get(&c, &iv, 1, 5, false);
	T_ASSERT(!sc__ring_update_cons(&c, true));      /* forced, nobody blocked */
	T_EQ(atomic_load(&hdr.cons), 30);
}

static void test_geometry(void)
{
	uint32_t ring[2] = { 16384, 65536 };
	uint64_t so, d, sz;

	t_log("segment geometry is page aligned and covers every ring");
	sc__seg_geometry(255, ring, &so, &d, &sz);
	T_EQ(so, SC_CELLS_OFF + SC_CELLS_SIZE);
	T_EQ(d % 4096, 0);
	T_ASSERT(d >= so + 255 * sizeof(struct sc_slot));
	T_EQ(sz, d + 255ull * (16384 + 65536));
}

T_TEST(threshold) { test_threshold(); }
T_TEST(cursor_valid) { test_cursor_valid(); }
T_TEST(wrap) { test_wrap(0); }
T_TEST(wrap_u64) { test_wrap(UINT64_MAX - 3 * SC_RING_MIN); }
T_TEST(iov_skip) { test_iov_skip(); }
T_TEST(hostile) { test_hostile(); }
T_TEST(blocked_publishes) { test_blocked_publishes(); }
T_TEST(geometry) { test_geometry(); }

T_MAIN(NULL,
       T_ENTRY(threshold),
       T_ENTRY(cursor_valid),
       T_ENTRY(wrap),
       T_ENTRY(wrap_u64),
       T_ENTRY(iov_skip),
       T_ENTRY(hostile),
       T_ENTRY(blocked_publishes),
       T_ENTRY(geometry))
