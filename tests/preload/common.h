/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the preload oracle programs, tests/preload/<family>/
 * sem_*.c (libc only; never linked with libshortcut).  common.c is compiled
 * once, with epoll_common.c, spawn_common.c and exec_common.c, into an
 * archive that tests/preload/run.sh links every program with.
 *
 * A scenario is a server(lfd) and a client() function.  run() makes a
 * listener on 127.0.0.1:0, forks (the child is the client), bounds both
 * processes with alarm(20) and prints a transcript: the server's lines
 * first, then the client's (each process writes its own, so the output is
 * deterministic whatever the interleaving).  Both halves are sequenced with
 * two pipes (tell/await).  The same binary runs on kernel TCP and under
 * `shortcut run`; tests/preload/run.sh compares the two transcripts.
 *
 * The system headers below are part of the interface: a program includes
 * "common.h" and has the socket, poll, process and stdio calls.
 */
#ifndef SEM_COMMON_H
#define SEM_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))   /* for a program's own helpers */

/* ---- the scenario's state (set by run()) -------------------------------- */

extern bool t_child;            /* in the client process */
extern FILE *t_out;             /* this process's transcript */
extern int t_p2c[2], t_c2p[2];  /* the sync pipes: parent -> child, child -> parent */
extern uint16_t t_port;         /* the listener's port, host order */
extern pid_t t_pid;             /* the child (client), in the parent */
extern pid_t t_srv;             /* the parent (the server), in both */

/* Run a scenario: server(lfd) in this process, client() in a fork child;
 * prints both transcripts; 0 if the client ran to the end. */
int run(void (*server)(int lfd), void (*client)(void));

/* ---- the transcript --------------------------------------------------------- */

/* "EAGAIN", ... ("errno%d" for others) */
const char *ename(int e);
/* a transcript line, "server: " or "client: " first (errno kept) */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* to stderr; ends the process (the server kills the client and shows its
 * transcript as far as it got) */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* "what = n" or "what = -1 ENAME" */
void res(const char *what, long r);
const char *yesno(bool b);
/* "IN|OUT|RDHUP" (a ring of four buffers: several may appear in one say()) */
const char *pmask(int r);
/* poll one fd; prints "label: poll = N revents=MASK"; the revents, -1 on error */
int poll1(const char *label, int fd, short events, int timeout_ms);
void msleep(int ms);
/* fflush(stdout) and t_out, then fork(); fails loudly if it cannot */
pid_t t_fork(void);
/* SIGUSR1's handler: counts the signals caught in t_caught; flags: 0 (a
 * blocking call it interrupts fails with EINTR) or SA_RESTART */
extern volatile sig_atomic_t t_caught;
void t_on_usr1(int flags);

/* ---- waiting for events, not for time ------------------------------------ */

/* A wait below that has not seen its event after this long fails loudly (a
 * hang guard, not a deadline: on a busy machine the event is merely late). */
#define T_GUARD_MS 10000

long t_now_ms(void);            /* CLOCK_MONOTONIC */
/* the state letter of thread tid of process pid (/proc/PID/task/TID/stat:
 * 'R' running or runnable, 'S' asleep in a call, 'T' stopped, ...); '?'
 * when it cannot be read (gone) */
char t_state(pid_t pid, pid_t tid);
/* until thread tid of process pid is in state want ('S': asleep; 'T':
 * stopped).  For 'S' the caller knows the thread was awake since its last
 * sleep (it woke it through the sync pipe, or started it) and has nothing
 * to sleep in before the call it is sequenced into: the sleep seen is that
 * call blocking, on either transport (kernel TCP sleeps in the socket call,
 * the interposer in a futex or poll inside it).  Fails after T_GUARD_MS. */
void wait_state(pid_t pid, pid_t tid, char want, const char *what);
/* the same, giving up (false) after ms: for a thread that may wait without
 * sleeping (the interposer polls in some waits), where the scenario's
 * outcome does not depend on it */
bool wait_state_for(pid_t pid, pid_t tid, char want, int ms);
/* the other process of the scenario is asleep (its main thread): it woke up
 * at our last tell() and went on into the blocking call its side is at */
void await_peer_asleep(void);
/* a thread of this process is asleep */
void wait_thread_asleep(pid_t tid);
/* the process's name (/proc/PID/comm), "" if unknown */
void t_comm(pid_t pid, char *buf, size_t cap);
/* until the other process has exec'd (its name is no longer ours) */
void await_peer_exec(void);
/* until poll() reports one of events on fd (silently) */
void wait_ev(int fd, short events);
/* until ioctl(FIONREAD) on fd reports at least n bytes (silently) */
void wait_inq(int fd, int n);
int readable_bytes(int fd);             /* FIONREAD: bytes to read, -1 if it fails */
/* SIGPIPEs caught since count_sigpipes() (a handler, not the default death) */
extern volatile sig_atomic_t sigpipes;
void count_sigpipes(void);

/* ---- sequencing between the two processes (the sync pipes) --------------- */

void put_bytes(const void *p, size_t n);
void get_bytes(void *p, size_t n);      /* fails if the peer is gone */
void tell(void);                        /* one token to the other process */
void await_peer(void);                  /* one token from it */
void tell_u64(uint64_t v);
uint64_t await_u64(void);

/* ---- data ------------------------------------------------------------------ */

/* n bytes of the pattern seed from stream offset off */
void pattern(void *buf, size_t n, uint64_t off, unsigned seed);
#define CK_INIT 0xcbf29ce484222325ull
uint64_t ck(uint64_t h, const void *buf, size_t n);     /* FNV-1a */
/* send all of buf, waiting (poll) when the socket is nonblocking */
ssize_t send_all(int fd, const void *buf, size_t n);
/* receive n bytes (fewer at EOF), waiting (poll) when nonblocking */
ssize_t recv_all(int fd, void *buf, size_t n);
/* send n pattern bytes; returns their checksum */
uint64_t send_pattern(int fd, size_t n, unsigned seed);
/* receive n bytes (fewer at EOF); *got = how many; returns the checksum */
uint64_t recv_count(int fd, size_t n, size_t *got);
/* the checksum of n pattern bytes from offset 0 */
uint64_t pattern_ck(size_t n, unsigned seed);
/* an unlinked file /tmp/NAME.XXXXXX of size bytes (a multiple of 64 KiB)
 * of the pattern seed; its fd, the offset at its end */
int pattern_file(const char *name, size_t size, unsigned seed);
/* send bytes off..off+n of the pattern seed (fails loudly if it cannot) */
void send_at(int fd, size_t off, size_t n, unsigned seed);
/* receive n bytes: exactly bytes off..off+n of the pattern seed? */
bool recv_exact_at(int fd, size_t off, size_t n, unsigned seed);

/* ---- connections ------------------------------------------------------------ */

struct sockaddr_in t_addr(void);        /* the listener's address */
int make_listener(void);                /* 127.0.0.1:0, sets t_port */
int raw_connect(void);                  /* client: connected, nothing exchanged */
/* One byte each way, so that both ends are fully set up before a scenario
 * starts (the client's first send and the server's reply). */
void hs_client(int fd);
void hs_server(int fd);
int client_conn(void);                  /* raw_connect + hs_client */
int server_conn(int lfd);               /* accept + hs_server */
/* SO_RCVBUF of bytes on the listener, for the connections it will accept */
void set_rcvbuf(int lfd, int bytes);
/* client: a TCP socket with SO_SNDBUF of bytes, not connected yet */
int sndbuf_socket(int bytes);
/* client: connect fd to the listener, then hs_client */
void connect_hs(int fd);
/* client: a child process that connects (client_conn) and then waits to
 * be killed; its pid, once it has connected (fatal(what) if it did not) */
pid_t connected_kid(const char *what);
/* pass fd over the unix socket sp with SCM_RIGHTS (one byte, 'f', with
 * it): sendmsg()'s result */
ssize_t send_fd(int sp, int fd);
/* client: exec python3 (found in PATH) with argv (argv[0] "python3"), the
 * transcript (t_out) as its stdout and, unless keep_preload, LD_PRELOAD
 * out of its environment; does not return */
void exec_python(char *argv[], bool keep_preload) __attribute__((noreturn));

#endif
