/* SPDX-License-Identifier: MIT */
/*
 * What the epoll files share (epoll_set.c, epoll_ctl.c, epoll_wait.c).
 *
 * An epoll set that holds accelerated fds gets an inner epoll set of ours,
 * registered in it under a magic cookie.  The inner set watches, per
 * accelerated fd, what signals a change: the connection's pollable fd (or,
 * for a pending client, its attach eventfd and its kernel socket), and the
 * set's completion channel.  When the cookie fires, epoll_wait asks each
 * signalled registration for its real readiness.  Level-triggered
 * registrations that reported stay on a check list and are asked again at
 * every epoll_wait until they are not ready, so a wait costs O(ready), not
 * O(registered).  docs/interposer.md §5 has the whole story.
 */
#ifndef SC_EPOLL_H
#define SC_EPOLL_H

#include "interposer.h"
#include "spin.h"

/* Cookies: what the kernel's sets know our own registrations by.  An inner
 * set's registration in the program's set, and a nested program set's in
 * its outer set, are made under a value of ours instead of the program's
 * epoll_data, so that they are told from every fd of the program's: 20
 * bits of magic (a non-canonical address, no pointer has it), the
 * process's key (a set inherited across fork, or passed to another
 * process, is shared with it, whose cookies we must never report) and an
 * id naming the set.  The key is random, and a fork child's is never its
 * parent's: not the pid, which another PID namespace's process may have
 * too.  No cookie ever reaches the program: every wait, ours or the
 * kernel's, drops or translates them. */
#define EP_MAGIC_SET	0x5c0deull
#define EP_MAGIC_NEST	0x5c0dfull
#define EP_PID_MASK	0x3fffffu
extern _Atomic uint32_t ep_key;         /* 22 bits, never 0 (epoll_set.c) */
uint32_t ep_key_get(void);
static inline uint64_t ep_mkcookie(uint64_t magic, uint32_t id)
{
	return magic << 44 | (uint64_t)(ep_key_get() & EP_PID_MASK) << 22 | (id & EP_PID_MASK);
}

static inline uint64_t nest_cookie(uint32_t id)
{
	return ep_mkcookie(EP_MAGIC_NEST, id);
}

static inline bool is_nest_cookie(uint64_t v)
{
	return v >> 44 == EP_MAGIC_NEST;
}

static inline bool is_cookie(uint64_t v)
{
	return v >> 44 == EP_MAGIC_SET;
}

/* a cookie of this process's (not of a process that shares the set) */
static inline bool cookie_mine(uint64_t v)
{
	return (uint32_t)(v >> 22 & EP_PID_MASK) == ep_key_get();
}

struct sc_epreg {
	int fd;
	struct sc_sock *s;
	uint32_t events;        /* as the program asked */
	epoll_data_t data;
	bool listed;            /* on the check list */
	bool disabled;          /* EPOLLONESHOT fired; re-armed by MOD */
	bool deleted;           /* EPOLL_CTL_DEL'd: dormant until added again */
	bool shared;            /* its connection is bound to the set's channel */
	bool second;            /* ... as one of the connection's extra channels (chanx) */
	bool exclusive;         /* added with EPOLLEXCLUSIVE: no MOD (kernel rule) */
	bool foreign;           /* watched through another set's channel (nforeign) */
	bool force_edge;        /* EPOLLET: ADD or MOD polls it afresh, as the kernel's */
	/* The kernel's set holds it, not us: made while its socket was fresh
	 * (not connected yet), it follows the socket when connect() decides
	 * (ep_kregs_follow: ours then if it goes to shared memory, else the
	 * kernel's for good).  Only events and data mean anything; it is on
	 * the socket's kregs (knext, kreg_lock) and never watched. */
	bool kernel;
	struct sc_ep *ep;       /* (kernel) its set */
	struct sc_epreg *knext; /* (kernel) the socket's next one */
	uint64_t sig_fl;        /* EPOLLET: the flags when last reported (HUP/ERR edges) */
	bool settled;           /* EPOLLET: a pending client's, on shared memory since it
				 * last reported; sig_* its state then (reg_sig_settled) */
	bool settled_out;       /* ... and its room ran out while it was pending */
	struct sc_epreg *sib;   /* other entries of this set for the same connection
				 * (dup'd fds): the connection's user is the first */
	int kind;               /* what the inner set watches: 0 none, M_PENDING, M_SHM */
	uint64_t seen;          /* the epoll_wait call that last reported it */
	uint64_t sig_in, sig_out;       /* EPOLLET: state when last reported */
	uint32_t unwritable;    /* looks that found it wanting room (reg_sig) */
	bool fired;             /* signalled since last armed (on the fired list) */
	struct sc_epreg *fnext;
	int wfd[2];             /* the fds registered in the inner set */
	uint32_t gen;           /* its set's count when it was made: in the inner
				 * set's data with its fd (reg_token) */
	struct sc_epreg *next, *prev, *cnext;
};

/*
 * An epoll set of the program's: one per open file description, as the
 * kernel knows it, whatever fds name it.  The program may copy an epoll fd
 * (dup, dup2, dup3, F_DUPFD: mio registers through a copy and waits
 * through the original), close one copy while another lives, inherit it
 * across fork, or receive a copy with SCM_RIGHTS; every copy is the same
 * set.  The fds we saw made name it in the table (ep_of); one we did not
 * see made (SCM_RIGHTS) is recognised when it is used (ep_adopt).
 *
 * The shadow (inner set, channel, entries) appears when the first
 * accelerated fd is registered (inner >= 0; then the set is on `eps`).
 */
struct sc_ep {
	int fd;                 /* one of its fds, for our own calls on the kernel's set */
	int *fds, nfds, fds_cap;        /* every fd of ours naming it (eps_lock) */
	uint32_t id;            /* in its cookie */
	uint64_t cookie;        /* the inner set's data in the kernel's set */
	int inner;              /* the inner set; -1: no shadow yet */
	bool exposed;           /* in another epoll set, or polled: keep its fd's
				 * readiness true between our epoll_waits */
	bool shared;            /* inherited across fork: shared with another process */
	_Atomic bool child_used;        /* ... and a child of ours waits in it (ep_switched) */
	/* the completion channel of this waiting context: its connections
	 * bound to it wake it through one wake socket per link group, and one
	 * collect reports every one that became ready (O(ready)) */
	struct sc_chan *ch;
	/* guards the set's entries, lists, nests, channel; order: docs/interposer.md §6b */
	pthread_mutex_t lock;
	struct sc_epreg *regs, *check;
	/* the registration of each fd (at most one per fd): every lookup
	 * O(1), as the kernel's tree makes it (a list walk per epoll_ctl made
	 * 10,000 registrations quadratic) */
	struct sc_epreg **byfd;
	int nbyfd;
	uint32_t gens;
	struct sc_epreg *fired;         /* to re-arm before the next sleep */
	_Atomic uint64_t calls; /* epoll_wait calls (an fd is reported once per call) */
	/* entries watching a pending client (PENDING_SLICE_MS); written
	 * under lock, read without by a wait about to sleep (relaxed: a
	 * stale count costs one slice, or the decline's slices) */
	_Atomic int npending;
	/* zero-timeout waits in a row that found nothing, weighted by the
	 * cells each walked (ep_wait: arm the channel when they cost more than
	 * a wake-up would) */
	_Atomic unsigned idle_walk;
	bool held;              /* ep_expose found it ready (counted in nexp_sig) */
	/* fds of registrations in the inner set (wfd): none, and the inner
	 * set holds only the channel's fd (ep_inner_news) */
	_Atomic int nwatch;
	/* threads asleep in the kernel's wait on it, ours or passed through:
	 * a registration made meanwhile must wake them (epoll_ctl) */
	_Atomic int sleepers;
	/* how long a wait spins before it sleeps, learnt for the set
	 * (ep_spin; spin.c) */
	struct sc_spin_class spin;
	/* epoll sets of the program's registered in this one (nested): their
	 * events are checked before they are reported (see ep_wait) */
	struct sc_epnest {
		int fd;
		uint64_t cookie;        /* the kernel set knows it by this */
		uint64_t data;          /* the program's epoll_data */
		struct sc_epnest *next;
	} *nests;
	struct sc_ep *next;     /* on `eps` (shadowed sets) */
};

extern pthread_mutex_t eps_lock;
/* Paths that use a set found by its fd after dropping eps_lock (the exposed
 * and nested-set ones: a read in one thread may expose a set another
 * thread closes) hold this for reading; ep_close frees a set only with it
 * held for writing. */
extern pthread_rwlock_t ep_life;
extern struct sc_ep *eps;       /* the sets with a shadow */
extern _Atomic int neps;        /* fast path: no shadow at all */
/* Entries watching a connection through a channel that is not their set's
 * own (it is in another set too): while there are any, a set does not
 * reset its channel's fd when it wakes (the other set may be asleep on it),
 * and such entries are looked at in every call. */
extern _Atomic int nforeign;
extern const char ep_chan_mark;        /* inner-set data of the channel's fd */

/* a fork child's sets inherited with accelerated fds in them (epoll_set.c) */
struct ep_inh {
	struct sc_ep *ep;
	int fd;
	struct ep_inh *_Atomic next;
};
extern struct ep_inh *_Atomic ep_inh;
extern pthread_mutex_t ep_inh_lock;

/* epoll_set.c */
struct sc_ep *ep_get(int epfd, bool create);
struct sc_ep *ep_copy_of(int epfd, bool known);
bool ep_shadow(struct sc_ep *e);
void ep_created(int fd);
void ep_inherited_use(struct sc_ep *e);

/* epoll_ctl.c */
/* guards every socket's kregs list; taken last (inside e->lock) */
extern pthread_mutex_t kreg_lock;
void kreg_unlink(struct sc_epreg *r);
void ep_kregs_purge(struct sc_ep *e);
void ep_kregs_drop(struct sc_sock *s);
void check_add(struct sc_ep *e, struct sc_epreg *r);
void fired_add(struct sc_ep *e, struct sc_epreg *r);
void reg_free(struct sc_ep *e, struct sc_epreg *r);
/* e->lock held: fd's registration in e, or NULL; r into e's list and index
 * (-ENOMEM: neither); the inner set's data for r, and r back from it
 * (NULL: freed since) */
struct sc_epreg *reg_find(struct sc_ep *e, int fd);
int reg_link(struct sc_ep *e, struct sc_epreg *r);
uint64_t reg_token(const struct sc_epreg *r);
struct sc_epreg *reg_of_token(struct sc_ep *e, uint64_t token);
/* A user-space pointer's upper half is below this; a token's is not. */
#define REG_TOKEN_BIT (1ull << 63)
int ep_chan_ensure(struct sc_ep *e);
int ep_collect(struct sc_ep *e, bool arm);
uint32_t reg_eval(struct sc_ep *e, struct sc_epreg *r, bool *gone);
void reg_sig(struct sc_epreg *r, uint64_t sig[3]);
void reg_sig_settled(const struct sc_epreg *r, uint64_t sig[3]);
void ep_rewatch(struct sc_ep *except, struct sc_sock **socks, size_t n);
bool ep_elsewhere(struct sc_ep *e, struct sc_sock *s);

/* epoll_wait.c */
bool ep_arm(struct sc_ep *e, bool sleep);
void ep_hold(struct sc_ep *e, bool ready);
void ep_expose(struct sc_ep *e);
void ep_nest_set(struct sc_ep *e, int fd, int op, uint64_t data);
uint64_t ep_nest_cookie(struct sc_ep *e, int fd);
/* In a fork child: the nested sets of the sets we inherited, by cookie. */
struct inh_nest {
	uint64_t cookie, data;
};
extern struct inh_nest inh_nests[64];
extern int n_inh_nests;

#endif
