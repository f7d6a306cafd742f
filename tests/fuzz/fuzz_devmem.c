/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: device memory (issue 15).  What a peer controls: the
 * records it puts in a framed ring (binding id, chunk, length, check), the
 * chunk table it shares with us (owner words, the header's hint, free_seq,
 * waiters), and the chunk table header it sends with SC_MSG_DEVMEM; what
 * the program controls: the tokens it returns (SO_DEVMEM_DONTNEED's
 * ranges, any start and count).  The receiver is the real one: a region
 * bound with sc__dm_bind, its records read by sc__dm_recv_records into
 * fragments, tokens returned by sc__dm_release, chunks reclaimed at the
 * connection's end, everything returned by sc__dm_rx_free; the sender's
 * side maps the peer's table with sc__dm_peer_add and takes chunks in it.
 *
 * Whatever they write: no access outside the region, the ring or the
 * tables (ASan), a fragment always inside the region and inside one chunk
 * the connection owns, never the same chunk to two outstanding fragments,
 * a token returned frees at most one fragment, at most max_frags per call,
 * and no call runs long (libFuzzer's -timeout).
 *
 *     make fuzz FUZZ_SECONDS=600        (tests/fuzz.sh; seeds in corpus/devmem)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn.h"
#include "devmem.h"
#include "dmint.h"
#include "link.h"
#include "txrx.h"

#define SIZE SC_RING_MIN
#define NCHUNKS 64u
#define REGION (NCHUNKS * SC_DM_CHUNK_MIN)
#define MAXF 64

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "fuzz_devmem: %s\n", #x); abort(); } } while (0)

static int region_fd;
static uint32_t bind_id;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	region_fd = memfd_create("fuzz-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (region_fd < 0 || ftruncate(region_fd, REGION) < 0 ||
	    fcntl(region_fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		abort();
	int id = sc__dm_bind(region_fd, SC_DM_RX);
	if (id <= 0)
		abort();
	bind_id = (uint32_t)id;
	return 0;
}

/* k (at most 8) bytes of the input, little-endian */
static uint64_t take(const uint8_t **d, size_t *n, size_t k)
{
	uint64_t v = 0;
	k = *n < k ? *n : k;
	memcpy(&v, *d, k);
	*d += k;
	*n -= k;
	return v;
}

/* The peer's record, honest or not, in the ring (if there is room). */
static void put_rec(struct sc_ring *tx, const struct sc_dm_rec *r)
{
	if (sc__ring_space(tx, sizeof(*r)) < (int64_t)sizeof(*r))
		return;
	struct iovec v = { (void *)r, sizeof(*r) };
	sc__ring_put(tx, &v, 1, 0, sizeof(*r));
	sc__ring_publish(tx);
}

/* The sender's side: the peer's chunk table header as it sent it, mapped
 * (or refused), and chunks taken in it. */
static void peer_table(const uint8_t **d, size_t *n)
{
	struct sc_dm_hdr h;
	size_t k = *n < sizeof(h) ? *n : sizeof(h);
	memset(&h, 0, sizeof(h));
	memcpy(&h, *d, k);
	*d += k;
	*n -= k;
	uint32_t id = (uint32_t)take(d, n, 4);
	/* a table as long as the header says, give or take */
	size_t size = sizeof(h) + (size_t)(h.nchunks & 0xffff) * 8 + (take(d, n, 1) & 0x3f);
	/* sealed as ours are (an unsealed one is refused: test_devmem) */
	int fd = memfd_create("fuzz-table", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0 || pwrite(fd, &h, sizeof(h), 0) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		abort();
	struct sc_dm_peer *list = NULL;
	if (sc__dm_peer_add(&list, id, region_fd, fd) == 0) {
		struct sc_dm_peer *p = sc__dm_peer_find(&list, id);
		CHECK(p && (uint64_t)p->nchunks * p->chunk <= REGION);
		for (int k = 0; k < 3; k++) {
			int ch = sc__dm_take_chunk(p, 77);
			CHECK(ch == -EAGAIN || (ch >= 0 && (uint32_t)ch < p->nchunks));
			sc__dm_any_free(p);
			p->hdr->hint = (uint32_t)take(d, n, 4);
		}
		sc__dm_peers_free(list);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	static struct sc_ring_hdr h;
	static struct sc_group g;
	uint8_t *data = malloc(SIZE);          /* exact size: ASan sees any overrun */
	struct sc_conn c = { .g = &g, .slot = 3 };
	struct sc_ring tx;
	struct sc_dm_rx *rx;
	struct sc_dm_frag fr[MAXF];
	bool dead = false;

	memset(&h, 0, sizeof(h));
	g.id = 0x1234;
	sc__ring_init(&c.rx, &h, data, SIZE);
	sc__ring_init(&tx, &h, data, SIZE);
	if (!data || sc__dm_rx_new(&rx) < 0)
		abort();
	struct sc_dm_binding *b = rx->b;
	CHECK(b->id == bind_id && b->nchunks == NCHUNKS);
	uint64_t key = sc__dm_key(&c);
	while (n) {
		uint8_t op = (uint8_t)take(&d, &n, 1);
		switch (op & 7) {
		case 0: { /* the peer: a record, its check right or not */
			struct sc_dm_rec r = { .id = op & 0x80 ? (uint32_t)take(&d, &n, 4) : bind_id,
					       .chunk = (uint32_t)take(&d, &n, op & 0x40 ? 4 : 1),
					       .len = (uint32_t)take(&d, &n, 3) };
			r.check = op & 0x20 ? (uint32_t)take(&d, &n, 4) :
					      SC_DM_REC_MAGIC ^ r.id ^ r.chunk ^ r.len;
			put_rec(&tx, &r);
			break;
		}
		case 1: { /* the peer takes a chunk: owner = our key, or anything */
			uint32_t i = (uint32_t)take(&d, &n, 1) % NCHUNKS;
			atomic_store(&b->owner[i], op & 0x80 ? take(&d, &n, 8) : key);
			break;
		}
		case 2: /* the peer writes the table's header */
			atomic_store(&b->hdr->hint, (uint32_t)take(&d, &n, 4));
			atomic_store(&b->hdr->waiters, (uint32_t)take(&d, &n, 1));
			break;
		case 3: { /* we receive (a dead connection does not) */
			if (dead)
				break;
			int64_t av = sc__ring_avail(&c.rx);
			CHECK(av >= 0 && av <= SIZE);
			int max = 1 + (int)(take(&d, &n, 1) % MAXF), k = 0;
			size_t budget = 1 + take(&d, &n, 3);
			uint32_t out = sc__dm_rx_outstanding(rx);
			ssize_t got = sc__dm_recv_records(&c, rx, av, budget, fr, max, &k);
			if (got == -EPROTO) {
				dead = true;
				break;
			}
			CHECK(got >= 0 && k <= max);
			CHECK(sc__dm_rx_outstanding(rx) == out + (uint32_t)k);
			size_t sum = 0;
			for (int i = 0; i < k; i++) {
				CHECK(fr[i].id == bind_id && fr[i].size > 0 &&
				      fr[i].size <= SC_DM_CHUNK_MIN && fr[i].offset % SC_DM_CHUNK_MIN == 0 &&
				      fr[i].offset + fr[i].size <= REGION);
				uint32_t ch = (uint32_t)(fr[i].offset / SC_DM_CHUNK_MIN);
				CHECK(b->delivered[ch] && atomic_load(&b->owner[ch]) == key);
				for (int j = 0; j < i; j++)
					CHECK(fr[j].offset != fr[i].offset);
				sum += fr[i].size;
			}
			CHECK((size_t)got == sum);
			sc__ring_update_cons(&c.rx, op & 0x80);
			break;
		}
		case 4: { /* the program returns tokens (SO_DEVMEM_DONTNEED) */
			struct sc_dm_token t[4];
			int nt = 1 + (op >> 6);
			for (int i = 0; i < nt; i++) {
				t[i].start = (uint32_t)take(&d, &n, op & 0x20 ? 4 : 1);
				t[i].count = (uint32_t)take(&d, &n, op & 0x10 ? 4 : 1);
			}
			uint32_t out = sc__dm_rx_outstanding(rx);
			int max = op & 8 ? 1024 : 2;
			int freed = sc__dm_release(rx, t, nt, max);
			CHECK(freed >= 0 && freed <= max && (uint32_t)freed <= out);
			CHECK(sc__dm_rx_outstanding(rx) == out - (uint32_t)freed);
			break;
		}
		case 5: /* the connection ends: chunks taken, not delivered, back */
			sc__dm_rx_end(&c, rx);
			break;
		case 6: /* the sender's side: a table the peer sent */
			peer_table(&d, &n);
			break;
		case 7: /* the peer writes free_seq: anything */
			atomic_store(&b->hdr->free_seq, (uint32_t)take(&d, &n, 4));
			break;
		}
	}
	/* every token back: no chunk of ours delivered any more */
	sc__dm_rx_end(&c, rx);
	sc__dm_rx_free(rx);
	for (uint32_t i = 0; i < NCHUNKS; i++) {
		CHECK(!b->delivered[i]);
		atomic_store(&b->owner[i], 0);          /* (the peer's, for the next input) */
	}
	b->hdr->free_seq = b->hdr->waiters = b->hdr->hint = 0;
	free(data);
	return 0;
}
