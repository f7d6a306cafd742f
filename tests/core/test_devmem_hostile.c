/* SPDX-License-Identifier: MIT */
/*
 * A hostile (or broken) devmem sender: records that point outside the
 * region, name a chunk the connection does not own, name a chunk twice
 * (overlapping fragments) or fail their check.  Each breaks only its own
 * connection (EPROTO at the receiver, counted), the process survives (run
 * under ASan too), and an honest connection to the same binding goes on.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "devmem.h"
#include "dmint.h"
#include "notify.h"
#include "txrx.h"
#include "t_util.h"

#define REGION (256u * SC_DM_CHUNK_MIN)
enum { BAD_CHUNK, NOT_OWNED, TWICE, BAD_CHECK, HONEST, NCASES };
static const char *names[] = { "chunk outside the region", "a chunk it does not own",
			       "the same chunk twice", "a record that fails its check",
			       "honest" };

static int server(const char *path, void *arg)
{
	int mfd = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	T_ASSERT(mfd >= 0 && ftruncate(mfd, REGION) == 0);
	T_ASSERT(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	T_OK(sc__dm_bind(mfd, SC_DM_RX));
	struct sc_listener *l = NULL;
	for (int k = 0; k < NCASES; k++) {
		struct sc_conn *c = k ? NULL : t_accept_one(path, &l);
		if (k)
			T_OK(sc_accept(l, &c, 0));
		struct sc_dm_rx *rx;
		T_OK(sc__dm_rx_new(&rx));
		char buf[65536];
		struct iovec iov = { buf, sizeof(buf) };
		struct sc_dm_frag fr[64];
		int n;
		size_t lin;
		ssize_t r;
		uint64_t bytes = 0;
		T_EQ(sc_send(c, "go", 2, 0), 2);        /* asked for devmem: send */
		while ((r = sc__recv_devmem(c, rx, &iov, 1, fr, 64, &n, &lin, 0)) > 0) {
			bytes += (uint64_t)r;
			for (int i = 0; i < n; i++) {
				struct sc_dm_token t = { fr[i].token, 1 };
				if (k != TWICE)         /* (holds it: the repeat overlaps) */
					T_EQ(sc__dm_release(rx, &t, 1, 1024), 1);
			}
		}
		t_log("%s: %zd after %llu bytes", names[k], r, (unsigned long long)bytes);
		if (k == HONEST)
			T_EQ(r, 0);
		else
			T_EQ(r, -EPROTO);
		sc__dm_rx_end(c, rx);
		sc__dm_rx_free(rx);
		sc_close(c);
	}
	struct sc_stats st;
	sc_stats_get(&st);
	T_ASSERT(st.proto_errors >= NCASES - 1);
	sc_listener_close(l);
	return 0;
}

/* txlock: a record of our own making, published, the peer woken */
static void inject(struct sc_conn *c, uint32_t id, uint32_t chunk, uint32_t len, bool good_check)
{
	struct sc_dm_rec r = { .id = id, .chunk = chunk, .len = len };
	r.check = good_check ? SC_DM_REC_MAGIC ^ r.id ^ r.chunk ^ r.len : 0xbad;
	struct iovec v = { &r, sizeof(r) };
	sc__lock(&c->txlock);
	sc__ring_put(&c->tx, &v, 1, 0, sizeof(r));
	sc__ring_publish(&c->tx);
	sc__unlock(&c->txlock);
	atomic_thread_fence(memory_order_seq_cst);
	sc__notify_peer(c);
}

static int client(const char *path, void *arg)
{
	for (int k = 0; k < NCASES; k++) {
		struct sc_conn *c = t_connect_retry(path, 0, 10000);
		char b[2];
		T_EQ(sc_recv(c, b, 2, SC_WAITALL), 2);
		/* until the ring is framed (the receiver's region mapped) */
		char x[64] = { 0 };
		while (!c->dm_peer)
			T_EQ(sc_send(c, x, sizeof(x), 0), sizeof(x));
		struct sc_dm_peer *p = c->dm_peer;
		T_EQ(sc_send(c, x, sizeof(x), 0), sizeof(x));  /* one honest record */
		int ch;
		switch (k) {
		case BAD_CHUNK:
			inject(c, p->id, p->nchunks + 7, 100, true);
			break;
		case NOT_OWNED:
			inject(c, p->id, (uint32_t)p->nchunks - 1, 100, true);
			break;
		case TWICE:
			ch = sc__dm_take_chunk(p, sc__dm_key(c));
			T_ASSERT(ch >= 0);
			inject(c, p->id, (uint32_t)ch, 100, true);
			inject(c, p->id, (uint32_t)ch, 50, true);
			break;
		case BAD_CHECK:
			ch = sc__dm_take_chunk(p, sc__dm_key(c));
			T_ASSERT(ch >= 0);
			inject(c, p->id, (uint32_t)ch, 100, false);
			break;
		case HONEST:
			for (int i = 0; i < 1000; i++)
				T_EQ(sc_send(c, x, sizeof(x), 0), sizeof(x));
			sc_shutdown(c, SHUT_WR);
			break;
		}
		/* the receiver ends the connection (or reads to our EOF) */
		while (sc_recv(c, b, 1, 0) > 0)
			;
		sc_close(c);
	}
	return 0;
}

T_TEST(forged)
{
	char path[T_PATH_MAX];
	t_listen_path(path);
	t_run_pair(path, server, client, NULL);
}

T_MAIN(NULL, T_ENTRY(forged))
