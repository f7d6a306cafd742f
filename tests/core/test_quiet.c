/* SPDX-License-Identifier: MIT */
/*
 * A quiet OPEN (conn.h, SC_QUIET_*): an opener whose peer process has
 * joined its link group names the new slot in the word the waiting client
 * spins on, instead of sending the OPEN message.
 *
 *  quiet            the word said SPIN with the connection's tag: the
 *                   opener puts the slot's name there and sends nothing;
 *                   the listening side takes it up (sc__group_open_quiet)
 *                   and accepts it as an OPEN message's; bytes both ways
 *  not_spinning     the word 0 (nobody spins), or SPIN with another tag:
 *                   the OPEN is a message, and the word is left alone
 *  message_first    a message about the slot (SWITCH) reaches the
 *                   listening side before the client takes the word up:
 *                   the slot is opened there, once; the take-up finds it
 *                   done and opens nothing more
 *  late_message     a SWITCH for a connection the listening side has
 *                   closed (the slot not reused yet) opens nothing
 *  bad_word         a word naming an empty slot is the peer's protocol
 *                   error (the group killed, counted); one of another
 *                   kind or of a group we do not have opens nothing
 *
 * Two processes (t_run_pair): L listens (side 1: the client process of
 * the interposer's handshake), O opens (side 0: the acceptor).  Each names
 * itself through sc__ident_hook, as the interposer's processes do.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn.h"
#include "link.h"
#include "stats.h"
#include "t_util.h"

#define TAG     0x00a5a5a5123456ull
#define L_IDENT 0x1111ull
#define O_IDENT 0x2222ull

static _Atomic uint64_t *word;          /* the client's word, shared */
static int to_l[2], to_o[2];

static uint64_t l_ident(void) { return L_IDENT; }
static uint64_t o_ident(void) { return O_IDENT; }
static void signal_(int fd) { char b = 1; t_write_full(fd, &b, 1); }
static void await_(int fd) { char b; t_read_full(fd, &b, 1); }

static void setup(void)
{
	word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(word != MAP_FAILED);
	T_ASSERT(pipe(to_l) == 0 && pipe(to_o) == 0);
}

/* L: listen, accept O's first connection (its group's HELLO and OPEN
 * messages: the group joined from then on). */
static struct sc_listener *l_start(const char *path, struct sc_conn **first)
{
	struct sc_listener *l;
	sc__ident_hook = l_ident;
	T_ASSERT(sc_listen(path, 16, &l) == 0);
	T_ASSERT(sc_accept(l, first, 0) == 0);
	return l;
}

/* O: the first connection, then wait for L's word. */
static struct sc_conn *o_start(const char *path)
{
	sc__ident_hook = o_ident;
	struct sc_conn *c = t_connect_retry(path, 0, 5000);
	return c;
}

static struct sc_conn *o_open(const char *path, uint64_t tag, bool *quietly)
{
	struct sc_conn *c;
	int rc = sc__connect_tagged(path, tag, L_IDENT, NULL, 0, 0, 0, word, quietly, &c);
	T_ASSERTF(rc == 0, "sc__connect_tagged: %s", strerror(-rc));
	return c;
}

/* O: a message about c's slot, as a switch back to TCP sends */
static void o_switch(struct sc_conn *c, uint64_t tag)
{
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_SWITCH,
			    .version = SC_LAYOUT_VERSION, .slot = c->slot, .tag = tag };
	pthread_mutex_lock(&c->g->lock);
	T_ASSERT(sc__group_send(c->g, &m, -1) == 0);
	pthread_mutex_unlock(&c->g->lock);
}

/* L and O on a fresh path, the word 0 */
static void pair(int (*l)(const char *, void *), int (*o)(const char *, void *))
{
	char path[T_PATH_MAX];
	atomic_store(word, 0);
	t_run_pair(t_listen_path(path), l, o, NULL);
}

static void ping_pong(struct sc_conn *c, bool first)
{
	char b[5];
	if (first) {
		t_send_all(c, "hello", 5);
		t_recv_all(c, b, 5);
		T_ASSERT(!memcmp(b, "world", 5));
	} else {
		t_recv_all(c, b, 5);
		T_ASSERT(!memcmp(b, "hello", 5));
		t_send_all(c, "world", 5);
	}
}

/* ---- quiet ------------------------------------------------------------ */

static int quiet_l(const char *path, void *arg)
{
	struct sc_conn *first, *c;
	struct sc_listener *l = l_start(path, &first);
	atomic_store(word, sc__quiet_spin(TAG));
	signal_(to_o[1]);
	await_(to_l[0]);                /* O opened */
	uint64_t w = atomic_load(word);
	T_ASSERTF(sc__quiet_open(w), "word %#llx: no slot named", (unsigned long long)w);
	T_ASSERT(sc__group_open_quiet(O_IDENT, w, TAG) == 0);
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG && c->g == first->g);
	ping_pong(c, false);
	T_ASSERT(atomic_load(&sc__statp->opens_quiet) == 1);
	T_ASSERT(atomic_load(&sc__statp->proto_errors) == 0);
	await_(to_l[0]);
	return 0;
}

static int quiet_o(const char *path, void *arg)
{
	bool q = false;
	o_start(path);
	await_(to_o[0]);                /* L spins */
	struct sc_conn *c = o_open(path, TAG, &q);
	T_ASSERT(q);
	signal_(to_l[1]);
	ping_pong(c, true);
	signal_(to_l[1]);
	return 0;
}

T_TEST(quiet)
{
	pair(quiet_l, quiet_o);
}

/* ---- not_spinning ------------------------------------------------------ */

static int notspin_l(const char *path, void *arg)
{
	struct sc_conn *first, *c;
	struct sc_listener *l = l_start(path, &first);
	signal_(to_o[1]);               /* the word 0 */
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG);
	ping_pong(c, false);
	atomic_store(word, sc__quiet_spin(TAG + 1));    /* another's */
	signal_(to_o[1]);
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG);
	ping_pong(c, false);
	T_ASSERT(atomic_load(word) == sc__quiet_spin(TAG + 1));
	T_ASSERT(atomic_load(&sc__statp->opens_quiet) == 0);
	return 0;
}

static int notspin_o(const char *path, void *arg)
{
	bool q = true;
	o_start(path);
	for (int i = 0; i < 2; i++) {
		await_(to_o[0]);
		struct sc_conn *c = o_open(path, TAG, &q);
		T_ASSERT(!q);
		ping_pong(c, true);
	}
	return 0;
}

T_TEST(not_spinning)
{
	pair(notspin_l, notspin_o);
}

/* ---- message_first ----------------------------------------------------- */

static int first_l(const char *path, void *arg)
{
	struct sc_conn *first, *c, *more;
	struct sc_listener *l = l_start(path, &first);
	atomic_store(word, sc__quiet_spin(TAG));
	signal_(to_o[1]);
	/* the SWITCH opened it (the control thread read it) */
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG);
	uint64_t w = atomic_load(word);
	T_ASSERT(sc__quiet_open(w));
	T_ASSERT(sc__group_open_quiet(O_IDENT, w, TAG) == 0);
	T_ASSERT(sc_accept(l, &more, SC_NONBLOCK) == -EAGAIN);
	T_ASSERT(atomic_load(&sc__statp->opens_quiet) == 0);
	ping_pong(c, false);
	return 0;
}

static int first_o(const char *path, void *arg)
{
	bool q = false;
	o_start(path);
	await_(to_o[0]);
	struct sc_conn *c = o_open(path, TAG, &q);
	T_ASSERT(q);
	o_switch(c, TAG);
	ping_pong(c, true);
	return 0;
}

T_TEST(message_first)
{
	pair(first_l, first_o);
}

/* ---- late_message ------------------------------------------------------ */

static int late_l(const char *path, void *arg)
{
	struct sc_conn *first, *c, *more;
	struct sc_listener *l = l_start(path, &first);
	signal_(to_o[1]);
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG);
	ping_pong(c, false);
	T_ASSERT(sc_close(c) == 0);
	signal_(to_o[1]);
	/* the SWITCH came before this one's OPEN: it opened nothing */
	T_ASSERT(sc_accept(l, &c, 0) == 0);
	T_ASSERT(c->tag == TAG + 1);
	T_ASSERT(sc_accept(l, &more, SC_NONBLOCK) == -EAGAIN);
	ping_pong(c, false);
	return 0;
}

static int late_o(const char *path, void *arg)
{
	bool q = true;
	o_start(path);
	await_(to_o[0]);
	struct sc_conn *c = o_open(path, TAG, &q);
	T_ASSERT(!q);
	ping_pong(c, true);
	await_(to_o[0]);                /* L closed it; our half still says OPEN */
	o_switch(c, TAG);
	c = o_open(path, TAG + 1, &q);
	T_ASSERT(!q);
	ping_pong(c, true);
	return 0;
}

T_TEST(late_message)
{
	pair(late_l, late_o);
}

/* ---- bad_word ----------------------------------------------------------- */

static int bad_l(const char *path, void *arg)
{
	struct sc_conn *first;
	char b;
	l_start(path, &first);
	uint64_t gid = first->g->id;
	T_ASSERT(sc__group_open_quiet(O_IDENT, sc__quiet_spin(TAG), TAG) == -EINVAL);
	T_ASSERT(sc__group_open_quiet(O_IDENT, sc__quiet_word(gid + 1, 3), TAG) == -ENOENT);
	T_ASSERT(sc__group_open_quiet(O_IDENT + 1, sc__quiet_word(gid, 3), TAG) == -ENOENT);
	T_ASSERT(atomic_load(&sc__statp->proto_errors) == 0);
	/* slot 3 holds nothing: a lie, or a scribble of the peer's */
	T_ASSERT(sc__group_open_quiet(O_IDENT, sc__quiet_word(gid, 3), TAG) == -EPROTO);
	T_ASSERT(atomic_load(&sc__statp->proto_errors) == 1);
	T_ASSERT(sc_recv(first, &b, 1, 0) == -EPROTO);
	signal_(to_o[1]);
	return 0;
}

static int bad_o(const char *path, void *arg)
{
	char b;
	struct sc_conn *c = o_start(path);
	await_(to_o[0]);
	/* the listening side killed the group: our end is reset */
	ssize_t n = sc_recv(c, &b, 1, 0);
	T_ASSERTF(n == -ECONNRESET || n == -EPROTO, "recv: %zd", n);
	return 0;
}

T_TEST(bad_word)
{
	pair(bad_l, bad_o);
}

T_MAIN(setup, T_ENTRY(quiet), T_ENTRY(not_spinning), T_ENTRY(message_first),
       T_ENTRY(late_message), T_ENTRY(bad_word))
