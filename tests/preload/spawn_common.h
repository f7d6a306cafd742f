/* SPDX-License-Identifier: MIT */
/* The conversation shared by the spawn programs (fork/sem_system,
 * sem_system_lib, sem_popen; spawn_common.c, in the archive
 * tests/preload/run.sh links with): the client spawns a helper that uses
 * the connection between two parts of its own use of it.
 *
 * client -> server, seed 17: 0..5000 (before), 5000..5700 (the helper),
 * 5700..6700 (after);
 * server -> client, seed 16: 0..3000 (before: 0..1000 for the helper, the
 * rest for the client), 3000..5000 (after the spawn returned).  The server
 * gets the client's 5000, the helper's 700 and the client's 1000, exact
 * and in order, then EOF. */
#ifndef SEM_SPAWN_COMMON_H
#define SEM_SPAWN_COMMON_H

#include "common.h"

/* run(): the server's side of the conversation, and client (which calls
 * client_before, spawns, then client_after).  call is the spawning call's
 * name in the transcript ("system()"), helper who speaks in between
 * ("shell"). */
int spawn_run(const char *call, const char *helper, void (*client)(void));

/* the client's part before the spawn: its fd */
int client_before(void);
/* ... and after it */
void client_after(int fd);

/* LD_PRELOAD out of the environment the helper inherits, and back */
char *preload_off(void);
void preload_on(char *pre);

/* python's part, a script (argv[1]: the socket's fd): read the server's
 * 0..1000 from the socket (SO_RCVTIMEO, not settimeout(), which would leave
 * the shared file nonblocking; cleared after), then report (python lines
 * that say what it read: `got`, or the exception `e` in an except clause
 * already open), send the client's 5000..5700, then sent (python lines, may
 * be "").  The script is malloc'ed. */
char *spawn_py(const char *report, const char *sent);

#endif
