/* SPDX-License-Identifier: MIT */
/*
 * Link groups and rendezvous.  A link group is every connection between one
 * connecting process and one listening process that share a segment; its
 * SOCK_SEQPACKET Unix socket carries the segment fd, connection opens and
 * wake sockets (SCM_RIGHTS), and its hang-up tells a process that the peer died.
 * A control thread, alive while any group or listener exists, watches those
 * sockets; any thread may also drain a group's socket itself (sc__group_pump).
 */
#ifndef SC_LINK_H
#define SC_LINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "layout.h"

struct sc_conn;
struct sc_chan;
struct sc_listener;

struct sc_group {
	uint64_t id;
	int side;                       /* our side: 0 connecting, 1 accepting */
	int sock;                       /* SOCK_SEQPACKET to the peer process */
	uint8_t *base;                  /* segment mapping */
	uint64_t size;
	/* private copies of the geometry (never re-read from the segment) */
	uint32_t nslots, ring_size[2];
	uint64_t slots_off, data_off;
	struct sc_cell *my_cells, *peer_cells;

	pthread_mutex_t lock;           /* everything below */
	struct sc_conn *conns[SC_MAX_SLOTS];    /* our connection per slot */
	bool slot_busy[SC_MAX_SLOTS];   /* side 0: allocated and not yet free */
	int nconns;                     /* live entries in conns[] */
	/* peer channels' wake sockets, by cell, and the generation of each:
	 * written under the lock, read by wakers without it
	 * (sc__group_peer_wake) */
	_Atomic int peer_wake[SC_MAX_CELLS];
	_Atomic uint32_t peer_gen[SC_MAX_CELLS];
	uint32_t my_gen;                /* last wake_gen we handed out */
	struct sc_chan *cell_chan[SC_MAX_CELLS];  /* our cells' owners */
	int cells_used;                 /* entries of cell_chan[] set */
	int holds;                      /* idle cells channels keep (notify.c): not freed while any */
	_Atomic bool dead;              /* peer gone or protocol broken (sc__group_dead) */
	bool hello_done;                /* side 1: HELLO received */
	bool zombie;                    /* waiting for the control thread to free it */
	bool no_new;                    /* side 0: the listener closed; open no more */
	pid_t peer_pid;                 /* SO_PEERCRED's: 0 if not seen from our PID
					 * namespace (for people only) */
	/* the peer process's identity in the run directory (0: not known;
	 * the C API has none): side 0 from the offer it answered, side 1
	 * from the HELLO.  Never a pid: pids repeat across namespaces */
	uint64_t peer_ident;
	/* devmem: the peer's regions we send into (read without the lock,
	 * appended under it, freed with the group), and our bindings we
	 * have shared with the peer */
	struct sc_dm_peer *dm_peers;
	uint32_t dm_shared[8];
	char *path;                     /* side 0: listener path (group reuse key) */
	struct sc_listener *listener;   /* side 1: where OPENs go; NULL once closed */
	struct sc_group *next;          /* global list */
};

/* g->dead: set once, under the group lock (sc__group_kill); read under it,
 * or without it as a hint (sc__notify_peer's choice of error, a listener's
 * look): relaxed, nothing is published with it, and a reader that acts on
 * it takes the lock or hears of the kill through the wake-ups it sends. */
static inline bool sc__group_dead(struct sc_group *g)
{
	return atomic_load_explicit(&g->dead, memory_order_relaxed);
}

static inline struct sc_slot *sc__slot(struct sc_group *g, uint32_t s)
{
	return (struct sc_slot *)(g->base + g->slots_off) + s;
}

static inline uint8_t *sc__ring_data(struct sc_group *g, uint32_t s, int dir)
{
	return g->base + g->data_off + (uint64_t)s * (g->ring_size[0] + g->ring_size[1]) +
	       (dir ? g->ring_size[0] : 0);
}

/* Control messages on the group socket. */
/* (SC_MSG_KICK: the only message on a rendezvous connection that is not a
 * group's: look at the switch requests in our slots, see sc__kick_owner) */
enum { SC_MSG_HELLO = 1, SC_MSG_OPEN, SC_MSG_CELL, SC_MSG_CLOSE, SC_MSG_SWITCH, SC_MSG_KICK,
       SC_MSG_DEVMEM       /* cell: binding id; two fds: region, chunk table */ };
struct sc_msg {
	uint32_t magic;                 /* SC_MSG_MAGIC */
	uint16_t type, version;
	union {
		uint32_t slot;          /* OPEN, SWITCH */
		uint32_t gen;           /* CELL: wake socket generation */
	};
	uint32_t cell;
	int32_t pid;
	union {
		uint32_t nslots;        /* HELLO */
		uint32_t early;         /* OPEN: bytes the opener put in our
					 * sending ring for us (the claimed
					 * offer's early bytes) */
	};
	uint32_t ring_size[2];
	union {
		uint64_t seg_size;      /* HELLO */
		uint64_t tag;           /* OPEN: the connector's claim tag (0: none);
					 * SWITCH: the tag of the connection meant */
	};
	uint64_t group_id;
	uint64_t ident;                 /* HELLO: the sender's identity (0: none) */
};
#define SC_MSG_MAGIC 0x5343544cu
_Static_assert(sizeof(struct sc_msg) == 56, "control message is a wire format");
_Static_assert(offsetof(struct sc_msg, seg_size) == 32, "seg_size offset");

/* Look up or create a link group towards path with a free slot; returns it
 * locked with the slot reserved in *slot.  A new group's segment is made
 * no larger than max_seg (0: no limit; the peer must map it): fewer slots,
 * or -ENOMEM if even one does not fit. */
int sc__group_for_connect(const char *path, uint64_t max_seg, uint64_t peer_ident,
			  struct sc_group **out, uint32_t *slot);
/* Has the process listening at path joined a live group of ours (a quiet
 * OPEN can go to it)?  A hint. */
bool sc__group_joined(const char *path);
/* A quiet OPEN (conn.h: SC_QUIET_*) for one of our clients: the slot its
 * word names, in our group with the process peer_ident, opened for the
 * connection tagged tag and handed to the group's listener as an OPEN
 * message's would be.  0: done (or done already, by a message about the
 * slot that came first); -errno: nothing opened (-EPROTO: the slot does
 * not hold it, and the group is killed, as for a bad OPEN). */
int sc__group_open_quiet(uint64_t peer_ident, uint64_t word, uint64_t tag);
/* Send a message (with an optional fd) on the group socket; caller holds lock. */
int sc__group_send(struct sc_group *g, const struct sc_msg *m, int fd);
/* Share binding id with g's peer (once): SC_MSG_DEVMEM. */
int sc__dm_share(struct sc_group *g, uint32_t id);
/* Drain pending control messages (caller holds the group lock). */
void sc__group_pump(struct sc_group *g);
/* Allocate a cell of ours for ch in g (group locked); returns index or -errno. */
int sc__group_cell_alloc(struct sc_group *g, struct sc_chan *ch);
void sc__group_cell_free(struct sc_group *g, uint32_t idx);
/* A channel keeps an idle cell of g (no connection bound through it) for
 * g's next connection: false if g is dead; the group is not freed while
 * held.  Both with the group locked. */
bool sc__group_hold(struct sc_group *g);
void sc__group_unhold(struct sc_group *g);
/* Hand our wake socket for cell idx to the peer, then publish its generation in
 * the cell (group locked).  A peer that is gone needs none: 0. */
int sc__group_cell_send(struct sc_group *g, uint32_t idx, int efd);
/* Drop a connection's slot from the group (group locked). */
void sc__group_release_slot(struct sc_group *g, uint32_t slot);
/* The peer's wake socket for cell idx at generation gen or a newer one
 * (pump if needed); -1 if none. */
int sc__group_peer_wake(struct sc_group *g, uint32_t idx, uint32_t gen);
/* A violation by the peer or its death: abort every connection of g. */
void sc__group_kill(struct sc_group *g, int err);
/* In a child after fork: drop (without touching the peers) every group and
 * listener the parent had; the child starts afresh.  Inherited link sockets
 * are closed so that the parent's death is still seen by its peers. */
void sc__link_atfork_child(void);

/* In a process that inherited connections across fork: wake the control
 * thread of the ancestor owner that owns them (it then looks at the slots'
 * sw_req): a KICK on its rendezvous socket (rdv_path: the caller knows
 * where it is), or else its eventfd kept across fork.  0, -ESRCH if
 * neither reaches it, or -errno. */
int sc__kick_owner(pid_t owner, const char *rdv_path);

/* One fd of another layer's for the control thread to watch while it runs
 * (it runs while the process has link groups or listeners): fn is called
 * on the thread, no lock held, when fd is readable, and must not block.
 * One watch per process (-EBUSY); a fork child has none.  watching: the
 * thread is running with fd in its set (fn will see what comes). */
int sc__ctl_watch(int fd, void (*fn)(void));
bool sc__ctl_watching(void);

/* Called by the control thread, holding no lock, after it handled a group's
 * messages (the interposer settles clients whose OPEN just arrived). */
extern void (*sc__ctl_after_hook)(void);

/* Our identity in the run directory, for the HELLOs we send (the
 * interposer's; NULL: none, the C API alone). */
extern uint64_t (*sc__ident_hook)(void);

/* Called by the control thread, group lock held, when the peer asks to
 * switch connection c back to TCP (SWITCH): c->sw is SC_SW_ASKED; or when
 * the peer died having forked (SC_LF_DEATH_SWITCH): a switch to come.  Must
 * not block or take a connection's locks (the interposer wakes a thread of
 * its own to do the switch, or to watch the kernel socket). */
extern void (*sc__switch_hook)(struct sc_conn *c);

/* The interposer's periodic look: once sc__tick_note is called, the
 * control thread calls sc__tick_hook every 50 ms, with no lock held, as
 * long as it returns true (it must not block). */
extern bool (*sc__tick_hook)(void);
void sc__tick_note(void);

/* Drain, from the calling thread, the sockets of every group whose OPENs
 * go to l: a caller waiting for one need not wait for the control thread. */
void sc__listener_pump(struct sc_listener *l);
/* The same for the groups with the process of identity ident only (a
 * caller that knows where its OPEN comes from: one read instead of one
 * per group), or for those whose socket is one of fds (poll said they
 * have news). */
void sc__listener_pump_peer(struct sc_listener *l, uint64_t ident);
void sc__listener_pump_socks(struct sc_listener *l, const int *fds, int n);
/* The sockets of the live groups whose OPENs go to l (at most max), for a
 * caller that waits for an OPEN itself; returns how many. */
int sc__listener_group_fds(struct sc_listener *l, int *fds, int max);

/* Listener backlog handed over by the control thread. */
int sc__listener_push(struct sc_listener *l, struct sc_conn *c);

#endif
