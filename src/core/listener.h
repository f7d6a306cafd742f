/* SPDX-License-Identifier: MIT */
#ifndef SC_LISTENER_H
#define SC_LISTENER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct sc_conn;

struct sc_listener {
	int sock;                       /* SOCK_SEQPACKET, listening */
	int efd;                        /* readable while the backlog is not empty */
	uint64_t id;                    /* control thread's name for it */
	char path[108];
	pthread_mutex_t lock;           /* backlog */
	struct sc_conn *head, *tail;
	int count, max;
	bool closed;
	/* if set, new connections go here instead of the backlog (called with
	 * the group lock held; 0 = taken, else refused) */
	int (*deliver)(struct sc_listener *l, struct sc_conn *c);
	struct sc_listener *next;       /* control thread's list */
};

int sc__listener_register(struct sc_listener *l);
void sc__listener_unregister(struct sc_listener *l);

#endif
