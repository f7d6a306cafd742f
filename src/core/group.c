/* SPDX-License-Identifier: MIT */
/*
 * Link groups (link.h): a sealed memfd segment shared by two processes, and
 * the SOCK_SEQPACKET Unix socket between them that carries its messages.
 *
 * Rendezvous: the connecting process creates a sealed memfd segment, connects
 * a SOCK_SEQPACKET Unix socket to the listener's path and sends HELLO with
 * the memfd (SCM_RIGHTS).  Each connection is then one OPEN message naming a
 * slot; wake sockets of completion channels travel as CELL messages.  Nothing is
 * named in the file system but the listener's own socket, and everything
 * goes away with the processes (kill -9 included): the socket's hang-up is
 * how the survivor learns of the death.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "txrx.h"
#include "stats.h"
#include "sys.h"

#include "ctl.h"
#include "dmint.h"

/* ---- messages ------------------------------------------------------- */

static int group_send2(struct sc_group *g, const struct sc_msg *m, int fd, int fd2)
{
	union { char buf[CMSG_SPACE(2 * sizeof(int))]; struct cmsghdr align; } u;
	struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		int fds[2] = { fd, fd2 }, nfd = fd2 >= 0 ? 2 : 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfd * sizeof(int));
	}
	/* never blocking (we may hold locks other connections need): the
	 * peer's control thread drains its socket at once, so a full buffer
	 * means a stopped or hostile peer; the caller fails with -EAGAIN */
	for (;;) {
		ssize_t n = sendmsg(g->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n == (ssize_t)sizeof(*m))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EPROTO;
	}
}

int sc__group_send(struct sc_group *g, const struct sc_msg *m, int fd)
{
	return group_send2(g, m, fd, -1);
}

int sc__dm_share(struct sc_group *g, uint32_t id)
{
	int rfd, cfd, rc = 0;
	pthread_mutex_lock(&g->lock);
	int i = 0;
	while (i < 8 && g->dm_shared[i] && g->dm_shared[i] != id)
		i++;
	if (i == 8)
		rc = -ENOSPC;           /* (eight bindings per peer) */
	else if (g->dm_shared[i] != id) {
		rc = sc__dm_share_fds(id, &rfd, &cfd);
		if (!rc) {
			struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_DEVMEM,
					    .version = SC_LAYOUT_VERSION, .cell = id,
					    .pid = sc__pid() };
			rc = sc__group_dead(g) ? -ECONNRESET : group_send2(g, &m, rfd, cfd);
		}
		if (!rc)
			g->dm_shared[i] = id;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

/* Receive one message and at most one fd; 1 = got one, 0 = none pending,
 * -errno on hang-up or garbage. */
static int recv_msg(struct sc_group *g, struct sc_msg *m, int *fd, int *fd2)
{
	union { char buf[CMSG_SPACE(sizeof(int) * 4)]; struct cmsghdr align; } u;
	struct iovec iov = { .iov_base = m, .iov_len = sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	ssize_t n;

	*fd = *fd2 = -1;
	do
		n = recvmsg(g->sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	/* take every fd passed, whatever else is wrong (a zero-length
	 * message, the hang-up's look-alike, included), so none leaks */
	int nfds = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int cnt = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < cnt; i++) {
			int f;
			memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (nfds++ == 0)
				*fd = f;
			else if (nfds == 2)
				*fd2 = f;
			else
				close(f);
		}
	}
	if (n == 0) {
		if (*fd >= 0)
			close(*fd);
		if (*fd2 >= 0)
			close(*fd2);
		*fd = *fd2 = -1;
		return -ECONNRESET;
	}
	if ((mh.msg_flags & MSG_CTRUNC) && nfds == 0) {
		/* an fd could not be installed here (our fd limit): a local
		 * failure, not the peer's */
		return -EMFILE;
	}
	if (nfds > (n == (ssize_t)sizeof(*m) && m->type == SC_MSG_DEVMEM ? 2 : 1) ||
	    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    n != (ssize_t)sizeof(*m) || m->magic != SC_MSG_MAGIC ||
	    m->version != SC_LAYOUT_VERSION) {
		if (*fd >= 0)
			close(*fd);
		if (*fd2 >= 0)
			close(*fd2);
		*fd = *fd2 = -1;
		return -EPROTO;
	}
	return 1;
}

/* ---- groups --------------------------------------------------------- */

struct sc_group *sc__group_alloc(int side, int sock)
{
	struct sc_group *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->side = side;
	g->sock = sock;
	pthread_mutex_init(&g->lock, NULL);
	for (int i = 0; i < SC_MAX_CELLS; i++)
		atomic_store_explicit(&g->peer_wake[i], -1, memory_order_relaxed);
	return g;
}

static void group_set_geometry(struct sc_group *g, uint32_t nslots, const uint32_t ring[2])
{
	g->nslots = nslots;
	g->ring_size[0] = ring[0];
	g->ring_size[1] = ring[1];
	sc__seg_geometry(nslots, ring, &g->slots_off, &g->data_off, &g->size);
}

static void group_map_cells(struct sc_group *g)
{
	struct sc_cell *cells = (struct sc_cell *)(g->base + SC_CELLS_OFF);
	g->my_cells = cells + g->side * SC_MAX_CELLS;
	g->peer_cells = cells + (!g->side) * SC_MAX_CELLS;
}

/* Free a group nobody references any more (control thread, no locks). */
void sc__group_free(struct sc_group *g)
{
	for (int i = 0; i < SC_MAX_CELLS; i++) {
		int ws = atomic_load_explicit(&g->peer_wake[i], memory_order_relaxed);
		if (ws >= 0)
			close(ws);
	}
	if (g->base)
		munmap(g->base, g->size);
	sc__dm_peers_free(g->dm_peers);
	if (g->sock >= 0)
		close(g->sock);
	pthread_mutex_destroy(&g->lock);
	free(g->path);
	free(g);
}

/* Queue a dead, unused group for the control thread (group lock held). */
static void group_maybe_zombie(struct sc_group *g)
{
	if (!sc__group_dead(g) || g->nconns || g->holds || g->zombie)
		return;
	g->zombie = true;
	/* seq_cst: before the kick; pairs with the exchange in ctl_main */
	atomic_store_explicit(&ctl.reap_due, true, memory_order_seq_cst);
	sc__ctl_kick();
}

static bool slot_free(struct sc_group *g, uint32_t s)
{
	if (!g->slot_busy[s])
		return true;
	if (g->conns[s])
		return false;
	/* acquire: the peer is done with the slot's memory */
	uint32_t f = atomic_load_explicit(&sc__slot(g, s)->side[1].flags, memory_order_acquire);
	if (f & SC_SF_RELEASED) {
		g->slot_busy[s] = false;
		return true;
	}
	return false;
}

static int find_slot(struct sc_group *g)
{
	for (uint32_t s = 0; s < g->nslots; s++)
		if (slot_free(g, s))
			return (int)s;
	return -1;
}

/* A SOCK_SEQPACKET connection to the rendezvous socket at path (a leading
 * '@': the abstract name), whose listener must be our own user's (our
 * segment goes to it: *cr, its credentials).  The socket, or -errno. */
static int rendezvous_dial(const char *path, struct ucred *cr)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t plen = strlen(path);
	if (plen == 0 || plen >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	socklen_t salen = offsetof(struct sockaddr_un, sun_path) + plen + (path[0] != '@');
	int sock = sc__fd_park(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
	if (sock < 0)
		return -errno;
	int rc;
	while ((rc = connect(sock, (struct sockaddr *)&sa, salen)) < 0 && errno == EINTR)
		;
	if (rc < 0)
		rc = (errno == ENOENT || errno == ECONNREFUSED) ? -ECONNREFUSED : -errno;
	socklen_t crl = sizeof(*cr);
	if (!rc && (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, cr, &crl) < 0 ||
		    !sc__peer_trusted(sock, cr)))
		rc = -ECONNREFUSED;
	if (!rc)
		return sock;
	close(sock);
	return rc;
}

/* g's segment: a memfd of its size, sealed (the peer can then map it
 * without fear of SIGBUS), mapped at g->base.  The memfd, or -errno. */
static int segment_make(struct sc_group *g)
{
	int memfd = memfd_create("shortcut", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (memfd < 0)
		return -errno;
	if (ftruncate(memfd, (off_t)g->size) < 0 || fcntl(memfd, F_ADD_SEALS, SEALS) < 0)
		goto fail;
	g->base = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (g->base != MAP_FAILED)
		return memfd;
	g->base = NULL;
fail:;
	int rc = -errno;
	close(memfd);
	return rc;
}

/* The segment's header, as its reader validates it (layout.h). */
static void segment_header(struct sc_group *g, const uint32_t ring[2])
{
	struct sc_seg_hdr *h = (struct sc_seg_hdr *)g->base;
	h->magic = SC_SEG_MAGIC;
	h->version = SC_LAYOUT_VERSION;
	h->hdr_size = sizeof(*h);
	h->seg_size = g->size;
	h->group_id = g->id;
	h->nslots = g->nslots;
	h->ring_size[0] = ring[0];
	h->ring_size[1] = ring[1];
	h->cells_off = SC_CELLS_OFF;
	h->slots_off = g->slots_off;
	h->data_off = g->data_off;
	h->creator_pid = getpid();
}

/* A new link group to the listener at path: its segment made, mapped and
 * sent with HELLO.  0 (*out) or -errno. */
static int group_create(const char *path, uint32_t nslots, struct sc_group **out)
{
	uint32_t ring[2] = { sc__cfg.wmem, sc__cfg.rmem };
	struct ucred cr;
	int sock = rendezvous_dial(path, &cr);
	if (sock < 0)
		return sock;
	int rc = -ENOMEM;
	struct sc_group *g = sc__group_alloc(0, sock);
	if (!g)
		goto err_sock;
	if (!(g->path = strdup(path)))
		goto err_group;
	group_set_geometry(g, nslots, ring);
	int memfd = segment_make(g);
	if (memfd < 0) {
		rc = memfd;
		goto err_group;
	}
	group_map_cells(g);
	uint64_t id;
	if (getentropy(&id, sizeof(id)) < 0)
		id = (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)g;
	g->id = id;
	segment_header(g, ring);
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_HELLO,
			    .version = SC_LAYOUT_VERSION, .pid = getpid(),
			    .nslots = g->nslots, .ring_size = { ring[0], ring[1] },
			    .seg_size = g->size, .group_id = id,
			    .ident = sc__ident_hook ? sc__ident_hook() : 0 };
	rc = sc__group_send(g, &m, memfd);
	close(memfd);
	if (rc)
		goto err_group;
	g->peer_pid = cr.pid;
	SC_STAT_ADD(groups_created, 1);
	*out = g;
	return 0;
err_group:
	g->sock = -1;
	sc__group_free(g);
err_sock:
	close(sock);
	return rc;
}

/* Add g to the global list and the control thread's epoll (ctl.lock held). */
int sc__group_register(struct sc_group *g)
{
	int rc = sc__ctl_start();
	if (rc)
		return rc;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = g };
	if (epoll_ctl(ctl.epfd, EPOLL_CTL_ADD, g->sock, &ev) < 0)
		return -errno;
	g->next = ctl.groups;
	ctl.groups = g;
	atomic_fetch_add_explicit(&ctl.ngroups, 1, memory_order_relaxed);
	return 0;
}

bool sc__group_joined(const char *path)
{
	bool joined = false;
	pthread_mutex_lock(&ctl.lock);
	for (struct sc_group *g = ctl.groups; g && !joined; g = g->next)
		/* (relaxed: a hint; the OPEN's own look decides) */
		joined = g->side == 0 && !strcmp(g->path, path) && !sc__group_dead(g) &&
			 atomic_load_explicit(&((struct sc_seg_hdr *)g->base)->joined,
					      memory_order_relaxed) == 1;
	pthread_mutex_unlock(&ctl.lock);
	return joined;
}

int sc__group_for_connect(const char *path, uint64_t max_seg, uint64_t peer_ident,
			  struct sc_group **out, uint32_t *slot)
{
	struct sc_group *g;
	int rc, s;
	unsigned n = 0;

	pthread_mutex_lock(&ctl.lock);
	for (g = ctl.groups; g; g = g->next) {
		if (g->side != 0 || strcmp(g->path, path) || g->nslots > sc__cfg.max_conns ||
		    g->ring_size[0] != sc__cfg.wmem || g->ring_size[1] != sc__cfg.rmem)
			continue;
		n++;
		pthread_mutex_lock(&g->lock);
		/* a peer that hung up (or closed its listener) since the control
		 * thread last looked: find out now rather than open into it */
		if (!sc__group_dead(g))
			sc__group_pump_locked(g, NULL);
		if (!sc__group_dead(g) && !g->no_new && (s = find_slot(g)) >= 0)
			goto found;
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&ctl.lock);

	/* connect outside ctl.lock: the listener may be in this process.
	 * The first group towards a process has few slots (a server that
	 * forks per connection makes one group per connection, and the peer
	 * maps and unmaps each), each further one four times more, up to
	 * SHORTCUT_MAX_CONNS. */
	uint32_t nslots = n < 4 ? 4u << (2 * n) : sc__cfg.max_conns;
	if (nslots > sc__cfg.max_conns)
		nslots = sc__cfg.max_conns;
	/* no larger than the peer can map (its address-space limit): a
	 * segment it cannot map would leave the connection without its OPEN */
	for (;;) {
		uint32_t ring[2] = { sc__cfg.wmem, sc__cfg.rmem };
		uint64_t so, dof, size;
		sc__seg_geometry(nslots, ring, &so, &dof, &size);
		if (!max_seg || size <= max_seg)
			break;
		if (nslots == 1)
			return -ENOMEM;
		nslots = nslots > 4 ? nslots / 4 : 1;
	}
	rc = group_create(path, nslots, &g);
	if (rc)
		return rc;
	pthread_mutex_lock(&ctl.lock);
	rc = sc__group_register(g);
	if (rc) {
		pthread_mutex_unlock(&ctl.lock);
		sc__group_free(g);
		return rc;
	}
	pthread_mutex_lock(&g->lock);
	g->peer_ident = peer_ident;     /* (the path names it too) */
	s = 0;
found:
	pthread_mutex_unlock(&ctl.lock);
	g->slot_busy[s] = true;
	*slot = (uint32_t)s;
	*out = g;
	return 0;
}

int sc__group_cell_alloc(struct sc_group *g, struct sc_chan *ch)
{
	/* a dead group still gets cells: its connections may hold data and
	 * an end of stream to report (local wake-ups only) */
	for (uint32_t i = 0; i < SC_MAX_CELLS; i++) {
		if (g->cell_chan[i])
			continue;
		struct sc_cell *cell = &g->my_cells[i];
		/* a recycled cell starts empty */
		atomic_store_explicit(&cell->armed, 0, memory_order_relaxed);
		for (int w = 0; w < 4; w++)
			atomic_store_explicit(&cell->ready[w], 0, memory_order_relaxed);
		g->cell_chan[i] = ch;
		g->cells_used++;
		return (int)i;
	}
	return -ENOSPC;
}

int sc__group_cell_send(struct sc_group *g, uint32_t idx, int efd)
{
	uint32_t gen = ++g->my_gen;
	struct sc_msg m = { .magic = SC_MSG_MAGIC, .type = SC_MSG_CELL,
			    .version = SC_LAYOUT_VERSION, .gen = gen, .cell = idx };

	if (sc__group_dead(g))
		return 0;
	int rc = sc__group_send(g, &m, efd);
	if (rc == -EPIPE || rc == -ECONNRESET)
		return 0;       /* the peer is gone: nobody to wake us remotely */
	if (rc)
		return rc;
	/* release: the message is in the socket before the peer can see the
	 * new generation and go looking for it */
	atomic_store_explicit(&g->my_cells[idx].wake_gen, gen, memory_order_release);
	return 0;
}

void sc__group_cell_free(struct sc_group *g, uint32_t idx)
{
	g->cell_chan[idx] = NULL;
	g->cells_used--;
}

bool sc__group_hold(struct sc_group *g)
{
	if (sc__group_dead(g))
		return false;
	g->holds++;
	return true;
}

void sc__group_unhold(struct sc_group *g)
{
	g->holds--;
	group_maybe_zombie(g);
}

void sc__group_release_slot(struct sc_group *g, uint32_t slot)
{
	g->conns[slot] = NULL;
	g->nconns--;
	group_maybe_zombie(g);
}


void sc__group_kill(struct sc_group *g, int err)
{
	bool was_dead = sc__group_dead(g);

	/* atomic: sc__notify_peer peeks at it without the group lock
	 * (relaxed: sc__group_dead) */
	atomic_store_explicit(&g->dead, true, memory_order_relaxed);
	for (uint32_t s = 0; s < g->nslots; s++) {
		struct sc_conn *c = g->conns[s];
		if (!c)
			continue;
		int e = err;
		if (err == -ECONNRESET && sc__switch_hook && (sc__conn_sw(c) ||
		    (atomic_load_explicit(&c->peer->flags, memory_order_acquire) & SC_SF_FROZEN))) {
			/* the peer froze it for a switch to TCP and went away
			 * (exec): its kernel socket lives on; the switch ends
			 * it, not its death.  (Without the interposer there is
			 * no switch and no TCP: a FROZEN flag is the peer's
			 * scribble, and its death ends the connection.) */
			sc__group_switch_ask(c);
			continue;
		}
		if (err == -ECONNRESET)
			sc__ring_take_held(&c->rx);     /* what it held back is ours */
		if (err == -ECONNRESET && sc__switch_hook && c->tag &&
		    (atomic_load_explicit(&c->peer->flags, memory_order_acquire) &
		     (SC_SF_FORKED | SC_SF_CLOSED | SC_SF_ABORT)) == SC_SF_FORKED) {
			/* it had forked: a child may hold its kernel socket and
			 * go on with the connection.  What it left in our ring
			 * is read first, then the kernel says (EOF, a reset, or
			 * the child's bytes).  The interposer watches the
			 * kernel socket meanwhile (sc__conn_peer_dead) */
			sc__conn_add_lflags(c, SC_LF_DEATH_SWITCH);
			sc__notify_self(c);
			sc__switch_hook(c);
			continue;
		}
		if (err == -ECONNRESET) {
			sc__conn_peer_dead(c);
			continue;
		}
		if (e && sc__conn_set_err(c, e))
			SC_STAT_ADD(conns_aborted, 1);
		/* a peer that broke the protocol but still runs sees a reset
		 * (flagged before it can see our hang-up below) */
		if (err == -EPROTO)
			sc__conn_set_flags(c, SC_SF_ABORT);
		sc__notify_self(c);
	}
	/* the peer sees our hang-up too, if it is still there */
	if (!was_dead)
		shutdown(g->sock, SHUT_RDWR);
	group_maybe_zombie(g);
}

/* HELLO on an accepted socket: validate and map the segment (group locked). */
static int group_hello(struct sc_group *g, const struct sc_msg *m, int fd)
{
	uint64_t slots_off, data_off, size;
	struct stat st;
	int seals;

	if (m->type != SC_MSG_HELLO || fd < 0 || m->nslots < 1 || m->nslots > SC_MAX_SLOTS)
		return -EPROTO;
	for (int d = 0; d < 2; d++) {
		uint32_t r = m->ring_size[d];
		if (r < SC_RING_MIN || r > SC_RING_MAX || (r & (r - 1)))
			return -EPROTO;
	}
	sc__seg_geometry(m->nslots, m->ring_size, &slots_off, &data_off, &size);
	if (m->seg_size != size || fstat(fd, &st) < 0 || (uint64_t)st.st_size != size)
		return -EPROTO;
	/* unsealed, the peer could shrink it under us and fault us */
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return -EPROTO;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	g->base = p;
	group_set_geometry(g, m->nslots, m->ring_size);
	group_map_cells(g);
	g->id = m->group_id;
	g->peer_ident = m->ident & ((1ull << 56) - 1);
	g->hello_done = true;
	/* release: the group is in our list, with its id and peer, before
	 * the opener sends us a quiet OPEN (conn.c) */
	atomic_store_explicit(&((struct sc_seg_hdr *)g->base)->joined, 1, memory_order_release);
	SC_STAT_ADD(groups_joined, 1);
	return 0;
}

/* The peer started a connection in slot, tagged tag, with early bytes of
 * ours in our sending ring (group locked): ours now, to the listener. */
static int group_open_slot(struct sc_group *g, uint32_t slot, uint64_t tag, uint32_t early,
			   struct sc_conn **refused)
{
	struct sc_conn *c;
	int rc;

	if (slot >= g->nslots || g->conns[slot] || early > SC_EARLY_MAX || early > g->ring_size[1])
		return -EPROTO;
	rc = sc__conn_new(g, slot, &c);
	if (rc)
		return rc;
	/* our first bytes, in our sending ring already (the opener put them
	 * there from our offer): ours to go on from */
	c->tx.prod = c->tx.pub = early;
	c->early = early;
	sc__conn_set_flags(c, SC_SF_OPEN);
	c->tag = tag;
	atomic_store_explicit(&c->me->tag, tag, memory_order_relaxed);
	SC_STAT_ADD(conns_opened, 1);
	if (!g->listener || sc__listener_push(g->listener, c)) {
		c->next = *refused;
		*refused = c;
	}
	return 0;
}

/* OPEN: the peer started a connection in a slot (group locked). */
static int group_open(struct sc_group *g, const struct sc_msg *m, struct sc_conn **refused)
{
	return group_open_slot(g, m->slot, m->tag, m->early, refused);
}

/* Slot, free on our side and never used by us since the peer reset it
 * (our half's flags 0: not a connection of ours that ended, whose late
 * message this is), opened quietly by the peer for tag: its half says so
 * (group locked).  Its early bytes, from its producer cursor of our
 * sending ring, in *early. */
static bool quiet_opened(struct sc_group *g, uint32_t slot, uint64_t tag, uint32_t *early)
{
	if (slot >= g->nslots || g->conns[slot] || !tag)
		return false;
	struct sc_slot *s = sc__slot(g, slot);
	/* acquire: the peer's stores before its word named the slot */
	uint32_t f = atomic_load_explicit(&s->side[0].flags, memory_order_acquire);
	*early = (uint32_t)atomic_load_explicit(&s->ring[1].prod, memory_order_acquire);
	return (f & SC_SF_OPEN) && atomic_load_explicit(&s->side[0].tag, memory_order_relaxed) == tag &&
	       atomic_load_explicit(&s->side[1].flags, memory_order_relaxed) == 0;
}

int sc__group_open_quiet(uint64_t peer_ident, uint64_t word, uint64_t tag)
{
	uint32_t slot = (uint32_t)(word >> 2 & 0xff), early;
	uint64_t gid = word >> 10 & SC_QUIET_GID;
	struct sc_conn *refused = NULL;
	struct sc_group *g;
	int rc = -ENOENT;

	if (!sc__quiet_open(word) || !peer_ident)
		return -EINVAL;
	pthread_mutex_lock(&ctl.lock);
	for (g = ctl.groups; g; g = g->next) {
		if (g->side != 1)
			continue;
		/* (its id and peer are the HELLO's, written under its lock) */
		pthread_mutex_lock(&g->lock);
		if (g->hello_done && g->peer_ident == peer_ident && (g->id & SC_QUIET_GID) == gid)
			break;
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&ctl.lock);
	if (!g)
		return rc;
	if (sc__group_dead(g)) {
		rc = -ECONNRESET;
	} else if (slot < g->nslots && g->conns[slot] && g->conns[slot]->tag == tag) {
		rc = 0;         /* a message about it came first: opened then */
	} else if (quiet_opened(g, slot, tag, &early)) {
		rc = group_open_slot(g, slot, tag, early, &refused);
		if (rc == 0)
			SC_STAT_ADD(opens_quiet, 1);
	} else {
		rc = -EPROTO;
	}
	if (rc == -EPROTO) {
		SC_STAT_ADD(proto_errors, 1);
		sc__group_kill(g, -EPROTO);
	}
	pthread_mutex_unlock(&g->lock);
	sc__group_finish_refused(refused);
	return rc;
}

/* Is fd a wake socket the peer made for us: a Unix datagram socket whose
 * other end belongs to the peer process?  We send to peer-supplied fds:
 * anything else (a pipe, a TCP socket, a socket to some other process)
 * must not get our bytes. */
static bool is_wake_socket(int fd, pid_t peer)
{
	int v;
	socklen_t l = sizeof(v);
	struct ucred cr;
	socklen_t crl = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
		return false;
	l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_DGRAM)
		return false;
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && cr.pid == peer;
}

/* CELL: the peer's wake socket for one of its cells (we own fd from here). */
static int group_cell(struct sc_group *g, const struct sc_msg *m, int fd)
{
	if (m->cell >= SC_MAX_CELLS || fd < 0 || !is_wake_socket(fd, g->peer_pid)) {
		if (fd >= 0)
			close(fd);
		return -EPROTO;
	}
	/* relaxed: only written under the group lock, which we hold */
	int old = atomic_load_explicit(&g->peer_wake[m->cell], memory_order_relaxed);
	if (old >= 0) {
		/* replace in place: a concurrent waker writes either the old
		 * or the new socket, never a recycled fd number */
		int rc = dup3(fd, old, O_CLOEXEC) < 0 ? -errno : 0;
		close(fd);
		if (rc)
			return rc;
	} else {
		fd = sc__fd_park(fd);
		/* release: pairs with the acquire in sc__group_peer_wake */
		atomic_store_explicit(&g->peer_wake[m->cell], fd, memory_order_release);
	}
	/* release: the socket (stored or replaced in place above) before its
	 * generation; pairs with the acquire in sc__group_peer_wake */
	atomic_store_explicit(&g->peer_gen[m->cell], m->gen, memory_order_release);
	return 0;
}

void (*sc__switch_hook)(struct sc_conn *c);

/* SWITCH: the peer goes back to TCP on one connection (group locked).  The
 * tag must name the connection now in the slot (a late message for a
 * closed one, or a peer's guess, touches nothing); a peer can only ever
 * switch its own connections with us. */
void sc__group_switch_ask(struct sc_conn *c)
{
	if (!sc__switch_hook)
		return;
	/* asked now, or frozen by us and waiting for this peer's half */
	int was = sc__conn_ask_sw(c);
	if (was == SC_SW_NONE || was == SC_SW_ASKED || was == SC_SW_FROZEN)
		sc__switch_hook(c);
}

static void group_switch(struct sc_group *g, const struct sc_msg *m, struct sc_conn **refused)
{
	uint32_t early;
	if (m->slot >= g->nslots)
		return;
	/* a slot opened quietly, its client not there yet: the message
	 * must not find it empty (opened here, the client finds it so) */
	if (g->side == 1 && quiet_opened(g, m->slot, m->tag, &early))
		group_open_slot(g, m->slot, m->tag, early, refused);
	struct sc_conn *c = g->conns[m->slot];
	if (c && c->tag && c->tag == m->tag)
		sc__group_switch_ask(c);
}

/* Drain the group socket (group locked).  Connections the listener refused
 * are returned in *refused for the caller to finish after unlocking. */
void sc__group_pump_locked(struct sc_group *g, struct sc_conn **refused)
{
	struct sc_msg m;
	int fd, fd2, rc;

	while (!sc__group_dead(g)) {
		rc = recv_msg(g, &m, &fd, &fd2);
		if (rc == 0)
			return;
		if (rc > 0) {
			if (g->side == 1 && !g->hello_done && m.type == SC_MSG_KICK) {
				/* not a group: a process that inherited one of
				 * our connections asks us to look at sw_req */
				/* seq_cst: pairs with the exchange in ctl_main */
				atomic_store_explicit(&sc__ctl_kicked, true, memory_order_seq_cst);
				rc = -ECONNRESET;
			} else if (g->side == 1 && !g->hello_done) {
				rc = group_hello(g, &m, fd);
			} else if (m.type == SC_MSG_OPEN && g->side == 1) {
				rc = group_open(g, &m, refused);
			} else if (m.type == SC_MSG_CELL) {
				rc = group_cell(g, &m, fd);
				fd = -1;
			} else if (m.type == SC_MSG_CLOSE && g->side == 0) {
				g->no_new = true;
			} else if (m.type == SC_MSG_SWITCH) {
				group_switch(g, &m, refused);
			} else if (m.type == SC_MSG_DEVMEM && fd >= 0 && fd2 >= 0) {
				/* the peer wants our payload in its region:
				 * mapped (a region we cannot map leaves the
				 * connections on plain bytes) */
				if (!sc__dm_peer_find(&g->dm_peers, m.cell))
					rc = sc__dm_peer_add(&g->dm_peers, m.cell, fd, fd2);
				if (rc == -ENOMEM || rc == -EINVAL || rc == -EBADF)
					rc = 0;
			} else {
				rc = -EPROTO;
			}
			if (fd2 >= 0)
				close(fd2);
			if (fd >= 0)
				close(fd);
			if (rc >= 0)
				continue;
		}
		if (rc == -EPROTO)
			SC_STAT_ADD(proto_errors, 1);
		sc__group_kill(g, rc == -EPROTO ? -EPROTO : -ECONNRESET);
		return;
	}
}

void sc__group_finish_refused(struct sc_conn *list)
{
	while (list) {
		struct sc_conn *next = list->next;
		sc__conn_refuse(list);
		list = next;
	}
}

void sc__group_pump(struct sc_group *g)
{
	struct sc_conn *refused = NULL;
	int saved = errno;      /* reached from entry points that keep errno */

	if (sc__ctl_pump_held == g) {
		sc__group_pump_locked(g, &sc__ctl_pump_refused);
		errno = saved;
		return;
	}
	pthread_mutex_lock(&g->lock);
	sc__group_pump_locked(g, &refused);
	pthread_mutex_unlock(&g->lock);
	sc__group_finish_refused(refused);
	errno = saved;
}

/* Is generation a older than b?  (They only grow, and wrap.) */
static bool gen_older(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

int sc__group_peer_wake(struct sc_group *g, uint32_t idx, uint32_t gen)
{
	/* acquire: pairs with the release in group_cell (the socket before
	 * its generation) */
	if (gen_older(atomic_load_explicit(&g->peer_gen[idx], memory_order_acquire), gen)) {
		/* the CELL message for this generation was sent before the
		 * generation became visible: it is in the socket */
		sc__group_pump(g);
		if (gen_older(atomic_load_explicit(&g->peer_gen[idx], memory_order_acquire), gen))
			return -1;
	}
	/* (a newer one: the cell was handed out again after the caller read
	 * its generation, before the owner stored the next; its socket, the
	 * same fd number replaced in place, is the one to wake now: the
	 * token the caller takes is the new owner's, or the take fails.
	 * Called a protocol error, it reset about one nginx upstream
	 * connection in a thousand, each one's cell handed out anew.) */
	/* acquire: pairs with the release in group_cell */
	return atomic_load_explicit(&g->peer_wake[idx], memory_order_acquire);
}

