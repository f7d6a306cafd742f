/* SPDX-License-Identifier: MIT */
/*
 * Device memory on a connection of the core (devmem.h): the receiver binds
 * a memfd region and reads with devmem; the sender's payload lands in the
 * region, the receiver gets fragments, checks every byte in its own mapping
 * of the region against the pattern, and returns the tokens.
 *
 * 1. plain bytes sent before devmem began come first, copied (linear);
 * 2. a 48 MiB stream of random send sizes (1 B .. 1 MiB) through a 1 MiB
 *    region: the region wraps many times, every chunk is reused;
 * 3. back-pressure: the receiver holds every token until the region is
 *    full; the sender waits (counted), nothing is lost or overwritten, and
 *    returning the tokens resumes the stream;
 * 4. a plain receive meeting fragments fails with EFAULT, as the kernel's;
 * 5. tokens: unknown ones free nothing, each frees once, at most max_frags
 *    looked at (a range of 2^32 - 1 returns at once);
 * 6. a send from a reader (splice) that has nothing gives its chunk back:
 *    more of them than the region has chunks, then the last message from
 *    a reader, in one fragment.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devmem.h"
#include "dmint.h"
#include "stats.h"
#include "txrx.h"
#include "t_util.h"

#define REGION   (1u << 20)
#define STREAM   (48ull << 20)
#define PRELUDE  1000
#define SEED     0x5eed
#define FULL_N   (REGION / SC_DM_CHUNK_MIN)      /* a small region: pages */

static uint64_t pat_seed(void)
{
	return SEED;
}

/* What one devmem receive brought: the linear bytes (in buf) and the
 * fragments (in the region), checked in stream order. */
static void check(uint64_t *off, const uint8_t *buf, size_t lin, const uint8_t *reg,
		  const struct sc_dm_frag *fr, int n, int id)
{
	T_PAT_CHECK(pat_seed(), *off, buf, lin);
	*off += lin;
	for (int i = 0; i < n; i++) {
		T_ASSERT(fr[i].offset + fr[i].size <= REGION);
		T_EQ(fr[i].id, id);
		T_PAT_CHECK(pat_seed(), *off, reg + fr[i].offset, fr[i].size);
		*off += fr[i].size;
	}
}

static int server(const char *path, void *arg)
{
	int mfd = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_ASSERT(mfd >= 0 && ftruncate(mfd, REGION) == 0);
	T_ASSERT(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);  /* as udmabuf needs */
	uint8_t *reg = mmap(NULL, REGION, PROT_READ, MAP_SHARED, mfd, 0);
	T_ASSERT(reg != MAP_FAILED);
	int id = T_OK(sc__dm_bind(mfd, SC_DM_RX));
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);
	struct sc_dm_rx *rx;
	T_OK(sc__dm_rx_new(&rx));
	T_EQ(sc__dm_rx_id(rx), id);

	static uint8_t buf[PRELUDE];
	struct iovec iov = { buf, sizeof(buf) };
	struct sc_dm_frag fr[256];
	int n;
	size_t lin;
	/* 1: the prelude was sent before we asked: plain bytes, copied (we
	 * ask at the first devmem receive, so wait for the whole prelude
	 * with a peek first: a sender slower than us would otherwise send
	 * it framed) */
	T_EQ(sc_recv(c, buf, PRELUDE, SC_PEEK | SC_WAITALL), PRELUDE);
	uint64_t off = 0;
	while (off < PRELUDE) {
		ssize_t k = sc__recv_devmem(c, rx, &iov, 1, fr, 256, &n, &lin, 0);
		T_ASSERT(k > 0);
		T_EQ(n, 0);
		T_EQ(lin, (size_t)k);
		T_PAT_CHECK(pat_seed(), off, buf, (size_t)k);
		off += (uint64_t)k;
	}
	/* 3 first: hold every token until nothing more comes */
	static uint8_t big[1 << 20];
	struct iovec biov = { big, sizeof(big) };
	struct sc_dm_token held[FULL_N];
	int nheld = 0;
	uint64_t frags = 0;
	while (nheld < (int)FULL_N) {
		ssize_t k = sc__recv_devmem(c, rx, &biov, 1, fr, 256, &n, &lin, 0);
		T_ASSERT(k > 0);
		check(&off, big, lin, reg, fr, n, id);
		for (int i = 0; i < n; i++)
			held[nheld++] = (struct sc_dm_token){ fr[i].token, 1 };
		frags += (uint64_t)n;
	}
	T_EQ(sc__dm_rx_outstanding(rx), FULL_N);
	/* 4: nothing else can come (region full); a plain receive would
	 * meet fragments only once there are some: the sender is waiting */
	struct sc_dm_stats st;
	/* 5: an unknown token frees nothing; max_frags bounds a call */
	struct sc_dm_token bogus = { 100000, 5 };
	T_EQ(sc__dm_release(rx, &bogus, 1, 1024), 0);
	/* a range of 2^32 - 1 tokens: max_frags of them looked at, as the
	 * kernel does (before: four billion look-ups, fuzz_devmem's hang);
	 * a token after those is not reached */
	struct sc_dm_token huge[2] = { { 200000, UINT32_MAX }, held[0] };
	uint64_t t0 = t_now_ms();
	T_EQ(sc__dm_release(rx, huge, 2, 1024), 0);
	T_ASSERTF(t_now_ms() - t0 < 1000, "%llu ms", (unsigned long long)(t_now_ms() - t0));
	T_EQ(sc__dm_rx_outstanding(rx), FULL_N);
	T_EQ(sc__dm_release(rx, held, 4, 2), 2);
	T_EQ(sc__dm_release(rx, held, 2, 1024), 0);     /* freed already */
	T_EQ(sc__dm_release(rx, held + 2, nheld - 2, 1024), nheld - 2);
	T_EQ(sc__dm_rx_outstanding(rx), 0);
	/* 2: the rest, returning each fragment as it is checked */
	while (off < PRELUDE + STREAM) {
		ssize_t k = sc__recv_devmem(c, rx, &biov, 1, fr, 256, &n, &lin, 0);
		T_ASSERT(k > 0);
		check(&off, big, lin, reg, fr, n, id);
		for (int i = 0; i < n; i++) {
			struct sc_dm_token t = { fr[i].token, 1 };
			T_EQ(sc__dm_release(rx, &t, 1, 1024), 1);
		}
		frags += (uint64_t)n;
	}
	T_EQ(off, PRELUDE + STREAM);
	/* 4: the last message, then a plain receive meets its fragment */
	T_EQ(sc_send(c, "k", 1, 0), 1);
	uint8_t b;
	T_EQ(sc_recv(c, &b, 1, 0), -EFAULT);
	ssize_t k = sc__recv_devmem(c, rx, &biov, 1, fr, 256, &n, &lin, 0);
	T_EQ(k, 7);
	T_EQ(n, 1);
	T_ASSERT(!memcmp(reg + fr[0].offset, "the end", 7));
	/* every chunk free again: the sender took the lowest (the chunk
	 * written last is the one still in the cache; taken round the
	 * region in turn, each write missed it) */
	T_EQ(fr[0].offset, 0);
	T_EQ(sc__recv_devmem(c, rx, &biov, 1, fr, 256, &n, &lin, 0), 0);   /* EOF */
	sc__dm_stats(&st);
	T_ASSERT(st.frags_delivered >= frags);
	t_log("%llu fragments, %llu outstanding", (unsigned long long)st.frags_delivered,
	      (unsigned long long)st.frags_outstanding);
	sc__dm_rx_free(rx);
	T_EQ(sc__dm_unbind((uint32_t)id), 0);
	T_EQ(sc__dm_unbind((uint32_t)id), -ENOENT);
	sc_close(c);
	sc_listener_close(l);
	return 0;
}

/* A reader (struct sc_src) over a buffer: what it has, then 0. */
struct feed {
	const char *p;
	size_t n;
};

static ssize_t feed_read(void *arg, const struct iovec *v, int nv)
{
	struct feed *f = arg;
	size_t done = 0;
	for (int i = 0; i < nv && f->n; i++) {
		size_t k = v[i].iov_len < f->n ? v[i].iov_len : f->n;
		memcpy(v[i].iov_base, f->p, k);
		f->p += k;
		f->n -= k;
		done += k;
	}
	return (ssize_t)done;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 10000);
	static uint8_t buf[1 << 20];
	t_pat_fill(pat_seed(), 0, buf, PRELUDE);
	T_EQ(sc_send(c, buf, PRELUDE, 0), PRELUDE);
	/* the receiver asks for devmem at its first devmem receive: what we
	 * send before our ring is framed goes as plain bytes */
	struct t_rng r;
	t_rng_seed(&r, t_seed());
	uint64_t off = PRELUDE;
	while (off < PRELUDE + STREAM) {
		size_t n = t_rng_below(&r, 4) ? (size_t)t_rng_range(&r, 1, 8192)
					      : (size_t)t_rng_range(&r, 1, sizeof(buf));
		if (n > PRELUDE + STREAM - off)
			n = (size_t)(PRELUDE + STREAM - off);
		t_pat_fill(pat_seed(), off, buf, n);
		ssize_t k = sc_send(c, buf, n, 0);
		T_ASSERT(k > 0);
		off += (uint64_t)k;
	}
	uint8_t b;
	T_EQ(sc_recv(c, &b, 1, 0), 1);
	/* 6: every token is back by now */
	struct feed f = { 0 };
	struct sc_src src = { .rd = feed_read, .arg = &f };
	for (unsigned i = 0; i <= FULL_N; i++)
		T_EQ(sc__send_from(c, &src, 7, SC_NONBLOCK), 0);
	f = (struct feed){ "the end", 7 };
	T_EQ(sc__send_from(c, &src, 7, 0), 7);
	struct sc_dm_stats st;
	sc__dm_stats(&st);
	T_ASSERT(st.bytes_into_regions >= REGION);       /* (plain bytes until framed) */
	T_ASSERT(st.waits >= 1);        /* the full region made us wait */
	t_log("%llu bytes into the region, %llu waits",
	      (unsigned long long)st.bytes_into_regions, (unsigned long long)st.waits);
	sc_shutdown(c, SHUT_WR);
	sc_close(c);
	return 0;
}

/* A region a peer shares with us is mapped only if it cannot shrink under
 * our stores (a same-user peer could ftruncate an unsealed memfd and
 * fault us: SIGBUS); unsealed, we send that peer plain bytes.  Found by
 * reading, while writing fuzz_devmem (issue 15). */
static void unsealed_region_not_mapped(void)
{
	for (int sealed = 0; sealed < 2; sealed++) {
		int mfd = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		T_ASSERT(mfd >= 0 && ftruncate(mfd, REGION) == 0);
		if (sealed)
			T_ASSERT(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
		int id = T_OK(sc__dm_bind(mfd, SC_DM_RX));
		int rfd, cfd;
		T_OK(sc__dm_share_fds((uint32_t)id, &rfd, &cfd));
		struct sc_dm_peer *list = NULL;
		T_EQ(sc__dm_peer_add(&list, (uint32_t)id, rfd, cfd), sealed ? 0 : -EINVAL);
		T_ASSERT(!sealed == !sc__dm_peer_find(&list, (uint32_t)id));
		sc__dm_peers_free(list);
		T_OK(sc__dm_unbind((uint32_t)id));
		close(mfd);
	}
}

T_TEST(unsealed_region)
{
	unsealed_region_not_mapped();
}

/* 1-6 above, on one connection */
T_TEST(stream)
{
	char path[T_PATH_MAX];
	t_listen_path(path);
	t_run_pair(path, server, client, NULL);
}

T_MAIN(NULL, T_ENTRY(unsealed_region), T_ENTRY(stream))
