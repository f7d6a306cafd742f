/* SPDX-License-Identifier: MIT */
/*
 * Byte-exact streams in both directions at once.  Each process runs a sender
 * thread and a receiver thread on the same connection; write and read sizes
 * are random from 1 B to 4 MiB (biased toward small ones and toward the ring
 * size), some through sc_sendv/sc_recvv with several iovecs, some with
 * SC_MORE, SC_WAITALL and SC_PEEK.  Every byte is checked against the
 * pattern.  Run with the default rings and with the smallest (16 KiB).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t_util.h"

#define MAX_IO   (4u << 20)
#define MAX_IOV  8
#define IOV_GAP  64

struct dir_cfg {
	uint64_t total;         /* bytes per direction */
	uint64_t seed_c2s, seed_s2c;
	uint64_t rng_seed;
	uint32_t expect_ring;   /* 0: don't check */
};

struct worker {
	struct sc_conn *c;
	const char *who;
	uint64_t total;
	uint64_t pat_seed;
	uint64_t rng_seed;
	size_t ring;
	uint64_t done;          /* bytes sent / received */
	uint64_t ops, vec_ops, special_ops;
};

static size_t pick_size(struct t_rng *r, size_t ring)
{
	uint64_t p = t_rng_below(r, 100);
	size_t n;

	if (p < 35)
		n = (size_t)t_rng_range(r, 1, 64);
	else if (p < 55)
		n = (size_t)t_rng_range(r, 65, 4096);
	else if (p < 65)
		n = (size_t)t_rng_range(r, 4097, 65536);
	else if (p < 80)    /* just around the ring size */
		n = (size_t)t_rng_range(r, ring > 300 ? ring - 300 : 1, ring + 300);
	else if (p < 93)    /* between half and twice the ring */
		n = (size_t)t_rng_range(r, ring / 2, ring * 2);
	else
		n = (size_t)t_rng_range(r, 1, MAX_IO);
	if (n < 1)
		n = 1;
	if (n > MAX_IO)
		n = MAX_IO;
	return n;
}

/* Split len bytes of buf into k iovecs (some may be empty). */
static int split_iov(struct t_rng *r, char *base, size_t len, struct iovec *iov,
		     int gaps)
{
	int k = (int)t_rng_range(r, 1, MAX_IOV);
	size_t left = len, pos = 0;

	for (int i = 0; i < k; i++) {
		size_t n = i == k - 1 ? left : (size_t)t_rng_below(r, left + 1);

		/* make small pieces likely too */
		if (i < k - 1 && t_rng_below(r, 3) == 0)
			n = n < 16 ? n : (size_t)t_rng_below(r, 17);
		iov[i].iov_base = base + pos;
		iov[i].iov_len = n;
		pos += n + (gaps ? (size_t)t_rng_below(r, IOV_GAP + 1) : 0);
		left -= n;
	}
	return k;
}

static void *sender(void *p)
{
	struct worker *w = p;
	struct t_rng r;
	char *buf = malloc(MAX_IO);
	uint64_t off = 0;

	T_ASSERT(buf != NULL);
	t_rng_seed(&r, w->rng_seed);
	while (off < w->total) {
		size_t n = pick_size(&r, w->ring);
		uint64_t mode = t_rng_below(&r, 10);
		ssize_t ret;

		if (n > w->total - off)
			n = (size_t)(w->total - off);
		t_pat_fill(w->pat_seed, off, buf, n);
		if (mode < 4) {
			/* send, sometimes with SC_MORE (never on the last chunk) */
			int flags = 0;

			if (mode == 0 && off + n < w->total) {
				flags = SC_MORE;
				w->special_ops++;
			}
			ret = sc_send(w->c, buf, n, flags);
			if (ret != (ssize_t)n)
				T_FAIL("%s: sc_send(%zu, flags %d) at offset %llu returned %zd%s",
				       w->who, n, flags, (unsigned long long)off, ret,
				       t_errname_(ret));
			if (flags && t_rng_below(&r, 2) == 0)
				T_EQ(sc_flush(w->c), 0);
		} else if (mode < 7) {
			struct iovec iov[MAX_IOV];
			int k = split_iov(&r, buf, n, iov, 0);

			ret = sc_sendv(w->c, iov, k, 0);
			if (ret != (ssize_t)n)
				T_FAIL("%s: sc_sendv(%zu bytes, %d iovecs) at offset %llu "
				       "returned %zd%s", w->who, n, k,
				       (unsigned long long)off, ret, t_errname_(ret));
			w->vec_ops++;
		} else {
			/* several smaller sends of the same chunk */
			size_t pos = 0;

			while (pos < n) {
				size_t m = (size_t)t_rng_range(&r, 1, n - pos);

				ret = sc_send(w->c, buf + pos, m, 0);
				if (ret != (ssize_t)m)
					T_FAIL("%s: sc_send(%zu) at offset %llu returned %zd%s",
					       w->who, m, (unsigned long long)(off + pos),
					       ret, t_errname_(ret));
				pos += m;
				w->ops++;
			}
		}
		off += n;
		w->ops++;
	}
	T_EQ(sc_shutdown(w->c, SHUT_WR), 0);
	w->done = off;
	free(buf);
	return NULL;
}

static void *receiver(void *p)
{
	struct worker *w = p;
	struct t_rng r;
	char *buf = malloc(MAX_IO + MAX_IOV * IOV_GAP + 64);
	uint64_t off = 0;
	ssize_t ret;

	T_ASSERT(buf != NULL);
	t_rng_seed(&r, w->rng_seed);
	for (;;) {
		size_t n = pick_size(&r, w->ring);
		uint64_t mode = t_rng_below(&r, 10), left = w->total - off;

		if (mode == 5 && left > 0) {
			/* SC_WAITALL: exactly min(n, left) bytes */
			if (n > left)
				n = (size_t)left;
			ret = sc_recv(w->c, buf, n, SC_WAITALL);
			if (ret != (ssize_t)n)
				T_FAIL("%s: sc_recv(%zu, SC_WAITALL) at offset %llu with %llu "
				       "bytes still to come returned %zd%s", w->who, n,
				       (unsigned long long)off, (unsigned long long)left,
				       ret, t_errname_(ret));
			T_PAT_CHECK(w->pat_seed, off, buf, n);
			w->special_ops++;
		} else if (mode == 6) {
			/* SC_PEEK, then consume exactly what was peeked */
			ret = sc_recv(w->c, buf, n, SC_PEEK);
			if (ret < 0)
				T_FAIL("%s: sc_recv(%zu, SC_PEEK) at offset %llu returned %zd%s",
				       w->who, n, (unsigned long long)off, ret, t_errname_(ret));
			if (ret == 0) {
				T_EQ(off, w->total);
				break;
			}
			T_ASSERT((size_t)ret <= n);
			T_PAT_CHECK(w->pat_seed, off, buf, (size_t)ret);
			memset(buf, 0xee, (size_t)ret);
			{
				ssize_t r2 = sc_recv(w->c, buf, (size_t)ret, 0);

				if (r2 != ret)
					T_FAIL("%s: sc_recv(%zd) after SC_PEEK returned %zd "
					       "at offset %llu%s", w->who, ret, r2,
					       (unsigned long long)off, t_errname_(r2));
			}
			T_PAT_CHECK(w->pat_seed, off, buf, (size_t)ret);
			w->special_ops++;
		} else if (mode >= 7) {
			struct iovec iov[MAX_IOV];
			int k = split_iov(&r, buf, n, iov, 1);
			size_t rem;
			uint64_t o = off;

			ret = sc_recvv(w->c, iov, k, 0);
			if (ret < 0)
				T_FAIL("%s: sc_recvv(%zu bytes, %d iovecs) at offset %llu "
				       "returned %zd%s", w->who, n, k,
				       (unsigned long long)off, ret, t_errname_(ret));
			if (ret == 0) {
				T_EQ(off, w->total);
				break;
			}
			T_ASSERT((size_t)ret <= n);
			rem = (size_t)ret;
			for (int i = 0; i < k && rem; i++) {
				size_t m = iov[i].iov_len < rem ? iov[i].iov_len : rem;

				T_PAT_CHECK(w->pat_seed, o, iov[i].iov_base, m);
				o += m;
				rem -= m;
			}
			w->vec_ops++;
		} else {
			ret = sc_recv(w->c, buf, n, 0);
			if (ret < 0)
				T_FAIL("%s: sc_recv(%zu) at offset %llu returned %zd%s",
				       w->who, n, (unsigned long long)off, ret, t_errname_(ret));
			if (ret == 0) {
				T_EQ(off, w->total);
				break;
			}
			T_ASSERT((size_t)ret <= n);
			T_PAT_CHECK(w->pat_seed, off, buf, (size_t)ret);
		}
		off += (uint64_t)ret;
		if (off > w->total)
			T_FAIL("%s: received %llu bytes, more than the %llu sent", w->who,
			       (unsigned long long)off, (unsigned long long)w->total);
		w->ops++;
	}
	/* end of stream is sticky */
	T_EQ(sc_recv(w->c, buf, 100, 0), 0);
	T_EQ(sc_recv(w->c, buf, 100, SC_NONBLOCK), 0);
	w->done = off;
	free(buf);
	return NULL;
}

static void run_side(struct sc_conn *c, const struct dir_cfg *cfg, int side)
{
	struct sc_conn_info info;
	struct sc_stats st;
	struct worker tx = { 0 }, rx = { 0 };
	pthread_t ttx, trx;

	memset(&info, 0, sizeof info);
	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.side, side);
	/* the peer is our sibling (both are children of the test's main) */
	T_ASSERT(info.peer_pid > 0 && info.peer_pid != getpid());
	T_EQ(t_ppid_of(info.peer_pid), getppid());
	if (cfg->expect_ring) {
		T_EQ(info.rx_ring_size, cfg->expect_ring);
		T_EQ(info.tx_ring_size, cfg->expect_ring);
	}
	T_ASSERT(info.rx_ring_size >= 16384);
	T_ASSERT(info.tx_ring_size >= 16384);

	tx.c = rx.c = c;
	tx.who = side ? "server sender" : "client sender";
	rx.who = side ? "server receiver" : "client receiver";
	tx.total = rx.total = cfg->total;
	tx.pat_seed = side ? cfg->seed_s2c : cfg->seed_c2s;
	rx.pat_seed = side ? cfg->seed_c2s : cfg->seed_s2c;
	tx.rng_seed = cfg->rng_seed * 4 + (uint64_t)side * 2;
	rx.rng_seed = cfg->rng_seed * 4 + (uint64_t)side * 2 + 1;
	tx.ring = info.tx_ring_size;
	rx.ring = info.rx_ring_size;

	T_EQ(pthread_create(&ttx, NULL, sender, &tx), 0);
	T_EQ(pthread_create(&trx, NULL, receiver, &rx), 0);
	T_EQ(pthread_join(ttx, NULL), 0);
	T_EQ(pthread_join(trx, NULL), 0);
	T_EQ(tx.done, cfg->total);
	T_EQ(rx.done, cfg->total);

	T_EQ(sc_conn_info(c, &info), 0);
	T_EQ(info.bytes_sent, cfg->total);
	T_EQ(info.bytes_received, cfg->total);
	T_EQ(info.rx_prod, cfg->total);
	T_EQ(info.rx_cons, cfg->total);
	T_EQ(info.tx_prod, cfg->total);
	T_ASSERT(info.tx_cons <= cfg->total);
	T_ASSERT(info.state & SC_EV_IN);      /* end of stream is readable */
	T_ASSERT(info.state & SC_EV_RDHUP);
	T_ASSERT(info.state & SC_EV_HUP);     /* both directions finished */
	T_ASSERT(!(info.state & SC_EV_ERR));
	T_EQ(sc_conn_events(c), info.state);
	sc_stats_get(&st);
	T_EQ(st.bytes_sent, cfg->total);
	T_EQ(st.bytes_received, cfg->total);
	T_EQ(st.conns_opened, 1);
	t_log("%s: %llu B each way; tx %llu ops (%llu vectored, %llu MORE), rx %llu ops "
	      "(%llu vectored, %llu WAITALL/PEEK); rings %u/%u; sleeps %llu, wakeups %llu",
	      side ? "server" : "client", (unsigned long long)cfg->total,
	      (unsigned long long)tx.ops, (unsigned long long)tx.vec_ops,
	      (unsigned long long)tx.special_ops, (unsigned long long)rx.ops,
	      (unsigned long long)rx.vec_ops, (unsigned long long)rx.special_ops,
	      info.rx_ring_size, info.tx_ring_size, (unsigned long long)info.sleeps,
	      (unsigned long long)info.wakeups_sent);
	T_EQ(sc_close(c), 0);
	sc_stats_get(&st);
	T_EQ(st.conns_closed, 1);
	T_EQ(st.conns_aborted, 0);
}

static int server(const char *path, void *arg)
{
	struct sc_listener *l;
	struct sc_conn *c = t_accept_one(path, &l);

	run_side(c, arg, 1);
	sc_listener_close(l);
	return 0;
}

static int client(const char *path, void *arg)
{
	struct sc_conn *c = t_connect_retry(path, 0, 5000);

	run_side(c, arg, 0);
	return 0;
}

static void run_case(const char *name, uint64_t total, uint32_t ring)
{
	char path[T_PATH_MAX];
	struct dir_cfg cfg;
	uint64_t t0 = t_now_ms(), seed = t_seed();

	cfg.total = total;
	cfg.seed_c2s = t_mix64(seed ^ 0x1111);
	cfg.seed_s2c = t_mix64(seed ^ 0x2222);
	cfg.rng_seed = t_mix64(seed ^ total ^ ring);
	cfg.expect_ring = ring;
	if (ring) {
		char v[32];

		snprintf(v, sizeof v, "%u", ring);
		setenv("SHORTCUT_RMEM", v, 1);
		setenv("SHORTCUT_WMEM", v, 1);
	}
	t_log("stream %s: %llu MiB each way, both directions at once, random sizes "
	      "1 B..4 MiB", name, (unsigned long long)(total >> 20));
	t_run_pair(t_listen_path(path), server, client, &cfg);
	if (ring) {
		unsetenv("SHORTCUT_RMEM");
		unsetenv("SHORTCUT_WMEM");
	}
	t_log("stream %s: ok (%llu ms)", name, (unsigned long long)(t_now_ms() - t0));
}

/* The main process never calls the library: each case runs in fresh
 * children, which read SHORTCUT_* on first use. */
static uint64_t total_bytes(void)
{
	uint64_t total = t_scale(64u << 20, 8u << 20);
	const char *mb = getenv("SC_TEST_STREAM_MB");   /* override, for debugging */

	if (mb && *mb)
		total = strtoull(mb, NULL, 0) << 20;
	return total;
}

T_TEST(default_rings)
{
	run_case("default rings", total_bytes(), 0);
}

T_TEST(small_rings)
{
	run_case("SHORTCUT_RMEM=SHORTCUT_WMEM=16384", total_bytes(), 16384);
}

T_MAIN(NULL, T_ENTRY(default_rings), T_ENTRY(small_rings))
