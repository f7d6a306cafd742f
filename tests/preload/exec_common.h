/* SPDX-License-Identifier: MIT */
/* Conversations shared by the programs that hand a live connection to
 * python3 run without the library (exec_common.c, in the archive
 * tests/preload/run.sh links with): the same bytes both ways, only the way
 * python3 gets the fd differs from one program to the other.
 *
 * exec_child_run (fork/sem_fork_exec_child, sem_spawn_child): the client
 * starts python3 as a child and keeps its copy of the fd, untouched until
 * the child exits.
 * client -> server, seed 71: 0..500 (message), 500..10500 (unread when
 * python3 starts), 10500..12500 (python);
 * server -> client, seed 72: 0..800 (answer), 800..40800 (unread when
 * python3 starts), 40800..43800 (after python started).  Python reads the
 * 40000 and the 3000, sends 2000 and shuts down writing (a FIN, although the
 * client still holds the socket); the server gets the client's 10000 then
 * python's 2000, exact and in order, then EOF. */
#ifndef SEM_EXEC_COMMON_H
#define SEM_EXEC_COMMON_H

#include "common.h"

/* run(): the conversation above.  how: the client's line before python3
 * starts ("fork a child that execs python3 without the library"); start:
 * runs python3 with argv (argv[0] "python3"), LD_PRELOAD out of its
 * environment and the client's transcript (t_out) as its stdout, and
 * returns its pid (the client waits for it). */
int exec_child_run(const char *how, pid_t (*start)(char *argv[]));

#endif
