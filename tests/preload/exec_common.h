/* SPDX-License-Identifier: MIT */
/* Conversations shared by the programs that hand a live connection to
 * python3, mostly run without the library (exec_common.c, in the archive
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
 * python's 2000, exact and in order, then EOF.
 *
 * exec_inflight_run (fork/sem_exec_inflight, sem_exec_lib): the client
 * itself exec()s python3, cut mid-stream with data in flight both ways.
 * client -> server, seed 17: 0..70000 (unread at the exec), 70000..70500
 * (python);
 * server -> client, seed 16: 0..100000 (sent before the exec; the client
 * reads the first `skip` of them), 100000..102000 (after python started).
 * Python reads the rest of the server's bytes, sends 500 and shuts down
 * writing; the server gets the client's 70000 then python's 500, exact and
 * in order, then EOF.
 *
 * echo_exec_client (switch/sem_switch_poll, sem_switch_epoll): the client
 * of a server that echoes all it reads on two connections.  On each, the
 * client sends messages of 100, 3000, 20000 and 40000 bytes (ECHO_EXEC_SENT
 * in all), each echo checked, then leaves echoes in flight: on connection 1
 * it sends 7000 and reads 1000 of their echo, on connection 2 it sends
 * inflight2 and reads none.  Then it exec()s python3 without the library
 * with both fds: python reads the pending echoes, sends about 200 KB more in
 * messages of pseudo-random sizes on both connections, checks every echoed
 * byte and closes both.  Connection 1's stream is pattern seed, connection
 * 2's seed + 1 (and so their echoes). */
#ifndef SEM_EXEC_COMMON_H
#define SEM_EXEC_COMMON_H

#include "common.h"

/* run(): the conversation above.  how: the client's line before python3
 * starts ("fork a child that execs python3 without the library"); start:
 * runs python3 with argv (argv[0] "python3"), LD_PRELOAD out of its
 * environment and the client's transcript (t_out) as its stdout, and
 * returns its pid (the client waits for it). */
int exec_child_run(const char *how, pid_t (*start)(char *argv[]));

/* run(): the conversation above.  skip: how many of the server's bytes the
 * client reads before the exec (0: none); keep_preload: python3 runs with
 * the client's LD_PRELOAD (the library loaded) rather than without it. */
int exec_inflight_run(size_t skip, bool keep_preload);

/* the client's bytes on each connection before the in-flight ones */
#define ECHO_EXEC_SENT (100 + 3000 + 20000 + 40000)

/* the client above (called as run()'s client); lcg: python's first state
 * of the sizes' generator; sent2(fd2): after the inflight2 bytes on
 * connection 2, says its line and does what the program waits for before
 * the exec */
void echo_exec_client(unsigned seed, unsigned lcg, size_t inflight2, void (*sent2)(int fd2));

#endif
