/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the epoll oracle programs with several connections
 * (epoll_common.c, in the archive tests/preload/run.sh links with): events
 * reported sorted by tag on one line, and a scripted client that the
 * server drives connection by connection (cmd(C_CONNECT | C_SEND |
 * C_SEND_LATER | C_END, connection, bytes)).
 */
#ifndef SEM_EPOLL_COMMON_H
#define SEM_EPOLL_COMMON_H

#include <stdatomic.h>
#include <sys/epoll.h>

#include "common.h"

enum { C_CONNECT = 1, C_SEND, C_SEND_LATER, C_END };

/* "label: epoll_wait = n [tag T MASK]..." into line, the events sorted by
 * tag (ev reordered); its length */
int fmt_events(char *line, size_t cap, const char *label, int n, struct epoll_event *ev);
/* epoll_wait(ep, 8 events, timeout_ms), said as fmt_events has it */
void wait_report(int ep, const char *label, int timeout_ms);
/* epoll_ctl(ep, op, fd, {events, tag}), said as "label = rc" */
int ctl(const char *label, int ep, int op, int fd, uint32_t events, uint64_t tag);
/* server: have the client do c on its connection conn (n bytes) */
void cmd(uint64_t c, uint64_t conn, uint64_t n);
/* server: the client makes n connections (C_CONNECT), one at a time;
 * conns[1..n] are the server's ends */
void cmd_connect(int lfd, int *conns, int n);
/* a thread of ours is asleep: its tid (set by the thread itself, 0 until
 * then) once it is, a hang guard failing loudly */
void wait_tid_asleep(_Atomic pid_t *tid);
/* read what is there, without waiting; says "label: read N" */
void drain(const char *label, int fd);
/* client: connections numbered from 1, bytes of fill; C_SEND_LATER
 * answers first and sends once the server's main thread sleeps (in the
 * wait that follows the command: the state of its thread, not a time) */
void cmd_client(char fill);

/* ---- a request and its reply, on a socket connected by hand ------------- */

/* server: connection i's request (5 bytes, said), the reply "world", the
 * client's EOF; closes fd */
void serve_request(int fd, int i);
/* server: n connections accepted in turn, each served so */
void serve_requests(int lfd, int n);
/* client: connect fd to the listener, said as "connect: 0 | EINPROGRESS |
 * ENAME"; connect's result */
int connect_said(int fd);
/* client: recv what is there, without waiting, said */
void get_reply(int fd);

#endif
