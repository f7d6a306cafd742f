/* SPDX-License-Identifier: MIT */
/*
 * What the control thread (ctl.c) and the link groups (group.c) share: the
 * process's groups and listeners, under ctl.lock.
 */
#ifndef SC_CTL_H
#define SC_CTL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "link.h"
#include "listener.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct sc_ctl {
	pthread_mutex_t lock;
	bool running;
	int epfd, wakefd;
	int reserve_fd;                 /* spare fd to shed a connection at EMFILE */
	/* changed under the lock, read without it by the thread (a hint:
	 * relaxed) */
	_Atomic int ngroups, nlisteners;
	uint64_t next_lid;
	struct sc_group *groups;
	struct sc_listener *listeners;
	struct sc_group *zombies;       /* dead, unused, to be freed by the thread */
	_Atomic bool reap_due;          /* a group became a zombie since the last reap */
	/* after fork: our ancestors' control-thread eventfds, to ask one of
	 * them to switch a connection we inherited (sc__kick_owner) */
	int nkick;
	pid_t kick_pid[8];
	int kick_fd[8];
	/* one more fd the thread watches for another layer (sc__ctl_watch) */
	int watch_fd;
	void (*watch_fn)(void);
	_Atomic bool watching;          /* watch_fd is in the running thread's set,
					 * and fn saw what came while it was not */
	_Atomic bool watch_new;         /* just put in the set: the thread calls fn */
};
extern struct sc_ctl ctl;

/* epoll data: a group pointer, or a listener id with the top bit set (an id,
 * not a pointer, because a listener may be freed while its event is queued) */
#define TAG_LISTENER (1ull << 63)
#define TAG_WATCH 1ull                  /* (no group is at address 1) */

/* ctl.c */
int sc__ctl_start(void);                /* ctl.lock held */
void sc__ctl_kick(void);
extern _Atomic bool sc__ctl_kicked;     /* a KICK came on the rendezvous */
/* The control thread's cork scan holds g->lock while it wakes peers; a
 * wake-up that must first read a CELL message pumps g in place (and the
 * connections that pump refuses are finished once the lock is gone). */
extern __thread struct sc_group *sc__ctl_pump_held;
extern __thread struct sc_conn *sc__ctl_pump_refused;

/* group.c */
struct sc_group *sc__group_alloc(int side, int sock);
void sc__group_free(struct sc_group *g);
int sc__group_register(struct sc_group *g);
void sc__group_switch_ask(struct sc_conn *c);
void sc__group_pump_locked(struct sc_group *g, struct sc_conn **refused);
void sc__group_finish_refused(struct sc_conn *list);

#endif
