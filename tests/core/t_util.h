/* SPDX-License-Identifier: MIT */
/*
 * Test helpers shared by tests/core/test_*.c (all names start with t_ / T_).
 *
 * Conventions: a test program is a list of named scenarios (T_MAIN below)
 * and exits 0 on success, 1 on failure, 77 when it skips.  Failures print
 * "[pid] file:line: message" to stderr.  Two-process tests fork children
 * with t_fork (children die with their parent), and the main process of a
 * test should not call the library before forking, so that every child
 * starts with fresh library state.
 */
#ifndef T_UTIL_H
#define T_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "shortcut.h"

/* ---- scenarios -------------------------------------------------------- */

/*
 * A test program is a list of named scenarios, each a function:
 *
 *	T_TEST(shut_rd)
 *	{
 *		...assertions...
 *	}
 *	...
 *	T_MAIN(NULL, T_ENTRY(shut_wr), T_ENTRY(shut_rd))
 *
 * T_MAIN defines main(): with no argument it runs every scenario in the
 * order listed, in this one process; `prog NAME...` runs those (in the
 * order given); `prog --list` prints the names.  An unknown name, or any
 * other option, prints the usage and exits 2.  The first argument of T_MAIN
 * is the program's setup (NULL: none), called once after the arguments are
 * checked and before the first scenario: what every scenario needs (pipes,
 * a run directory, a skip when the machine cannot run the test).  A
 * scenario must not rely on one run before it, so that it runs alone.  A
 * program whose main does more (test_scribble) calls t_main itself with a
 * table ending in { NULL, NULL }.
 *
 * When a scenario fails, the main process names it and how to run it alone
 * (with the seed, when the program drew one).  make check T=PROG:NAME runs
 * one scenario; tests/run-tests.sh takes PROG:NAME too.
 */
struct t_test {
	const char *name;
	void (*fn)(void);
};

#define T_TEST(name) static void t_test_##name(void)
#define T_ENTRY(name) { #name, t_test_##name }

int t_main(int argc, char **argv, void (*setup)(void), const struct t_test *tests);

#define T_MAIN(setup, ...) \
int main(int argc, char **argv) \
{ \
	static const struct t_test t_tests_[] = { __VA_ARGS__, { NULL, NULL } }; \
	return t_main(argc, argv, (setup), t_tests_); \
}

/* ---- assertions ------------------------------------------------------ */

void t_fail_(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

#define T_FAIL(...) t_fail_(__FILE__, __LINE__, __VA_ARGS__)

#define T_ASSERT(cond) do { \
	if (!(cond)) \
		t_fail_(__FILE__, __LINE__, "assertion failed: %s", #cond); \
} while (0)

/* T_ASSERT with an explanation (printf format). */
#define T_ASSERTF(cond, fmt, ...) do { \
	if (!(cond)) \
		t_fail_(__FILE__, __LINE__, "assertion failed: %s: " fmt, #cond, \
			__VA_ARGS__); \
} while (0)

/* Integer equality (values compared and printed as 64-bit). */
#define T_EQ(a, b) do { \
	long long t_a_ = (long long)(a), t_b_ = (long long)(b); \
	if (t_a_ != t_b_) \
		t_fail_(__FILE__, __LINE__, "%s == %s: %lld (0x%llx) != %lld (0x%llx)%s%s", \
			#a, #b, t_a_, (unsigned long long)t_a_, t_b_, \
			(unsigned long long)t_b_, t_errname_(t_a_), t_errname_(t_b_)); \
} while (0)

/* A library call that must succeed (result >= 0); evaluates to the result. */
#define T_OK(expr) ({ \
	long long t_r_ = (long long)(expr); \
	if (t_r_ < 0) \
		t_fail_(__FILE__, __LINE__, "%s failed: %lld%s", #expr, t_r_, \
			t_errname_(t_r_)); \
	t_r_; \
})

/* " (-EAGAIN: Resource temporarily unavailable)" for small negative values,
 * "" otherwise; for messages.  Returns a pointer into a thread-local ring. */
const char *t_errname_(long long v);

/* Print a message prefixed with the pid (stdout, flushed). */
void t_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Exit 77 after printing "SKIP: msg". */
void t_skip(const char *msg) __attribute__((noreturn));

/* ---- PRNG and stream pattern --------------------------------------------- */

struct t_rng { uint64_t s; };

uint64_t t_mix64(uint64_t x);                          /* splitmix64 finalizer */
void t_rng_seed(struct t_rng *r, uint64_t seed);
uint64_t t_rng_next(struct t_rng *r);                  /* xorshift64* */
uint64_t t_rng_below(struct t_rng *r, uint64_t n);     /* [0, n), n > 0 */
uint64_t t_rng_range(struct t_rng *r, uint64_t lo, uint64_t hi); /* [lo, hi] */
void t_shuffle(struct t_rng *r, int *v, size_t n);

/* Base seed of a test run: $SC_TEST_SEED if set, else time/pid; printed. */
uint64_t t_seed(void);

/*
 * Byte at stream offset i is byte (i % 8) of t_mix64(seed + (i / 8) * K)
 * (little-endian).  A receiver verifies a stream from its offset alone.
 */
uint8_t t_pat_byte(uint64_t seed, uint64_t off);
void t_pat_fill(uint64_t seed, uint64_t off, void *buf, size_t len);
/* Index of the first mismatching byte, or -1 if buf matches. */
ssize_t t_pat_find_bad(uint64_t seed, uint64_t off, const void *buf, size_t len);

#define T_PAT_CHECK(seed, off, buf, len) \
	t_pat_check_(__FILE__, __LINE__, (seed), (off), (buf), (len))
void t_pat_check_(const char *file, int line, uint64_t seed, uint64_t off,
		  const void *buf, size_t len);

/* ---- processes ------------------------------------------------------------ */

/*
 * Fork a child that runs fn(arg) and exits with its return value.  The child
 * gets SIGKILL if the forking thread's process dies.  stdio is flushed first.
 */
pid_t t_fork(int (*fn)(void *arg), void *arg);

/* Wait for pid; fail unless it exited with status 0. */
void t_wait_ok(pid_t pid);

/* Wait for pid; return the raw wait status. */
int t_wait_status(pid_t pid);

/* Parent pid of another process (from /proc/PID/stat), -1 if unknown. */
pid_t t_ppid_of(pid_t pid);

/* State letter of thread tid of process pid (/proc/PID/task/TID/stat: 'R',
 * 'S', 'T', ...), '?' if unknown. */
char t_state_of(pid_t pid, pid_t tid);

/* Wait until that thread is asleep (state S): blocked in the call the test
 * sequenced it into, as long as it had nothing else to sleep in since the
 * caller last woke it (through a pipe) or started it.  Fails after
 * limit_ms (a hang guard, not a deadline). */
void t_wait_asleep(pid_t pid, pid_t tid, unsigned limit_ms, const char *what);

/* "exited 3" / "killed by signal 9 (Killed)" */
const char *t_status_str(int status);

/*
 * Wait for both children; if one fails, SIGKILL the other and fail (so a
 * failing side does not leave its peer hanging until the global timeout).
 */
void t_wait_both(pid_t a, const char *name_a, pid_t b, const char *name_b);

/* Two-process test: server(path, arg) and client(path, arg) each run in a
 * fresh child; waits for both (t_wait_both). */
void t_run_pair(const char *path, int (*server)(const char *path, void *arg),
		int (*client)(const char *path, void *arg), void *arg);

/* The same on a fresh listen path (arg NULL), with SHORTCUT_RMEM and
 * SHORTCUT_WMEM set to 64 KiB and the pipes to_client and to_server made
 * first, for the two halves to sequence through. */
void t_run_pair_64k(int to_client[2], int to_server[2],
		    int (*server)(const char *path, void *arg),
		    int (*client)(const char *path, void *arg));

/* ---- library helpers -------------------------------------------------------- */

/* Unique abstract listen path "@sc-test-<pid>-<counter>"; buf >= T_PATH_MAX. */
#define T_PATH_MAX 108
char *t_listen_path(char *buf);

/* sc_connect, retrying -ECONNREFUSED (listener not there yet) up to
 * timeout_ms; fails the test on any other error or timeout. */
struct sc_conn *t_connect_retry(const char *path, int flags, int timeout_ms);

/* sc_listen + blocking sc_accept of one connection. */
struct sc_conn *t_accept_one(const char *path, struct sc_listener **lp);

/* Send exactly len bytes (blocking); fail otherwise. */
void t_send_all(struct sc_conn *c, const void *buf, size_t len);
/* Receive exactly len bytes (blocking); fail on EOF/error. */
void t_recv_all(struct sc_conn *c, void *buf, size_t len);

/* ---- system ------------------------------------------------------------- */

int t_fd_count(void);                        /* entries in /proc/self/fd */
void t_fd_dump(const char *why);             /* print them with readlink */
int t_maps_count(const char *needle);        /* /proc/self/maps lines with needle */
/* until this process's fds and memfd mappings are back to fds0 and maps0
 * (the library frees them soon after a close, on its own time); fails
 * after limit_ms (a hang guard, not a deadline), the fds dumped as why */
void t_wait_fds_back(int fds0, int maps0, unsigned limit_ms, const char *why);
uint64_t t_now_ms(void);                     /* CLOCK_MONOTONIC */

/* poll() one fd for POLLIN; the revents (0 on timeout). */
int t_poll_in(int fd, int timeout_ms);
/* poll(sc_conn_fd) until sc_conn_events has every bit of want; fails if the
 * fd times out or after limit_ms; the ms waited. */
uint64_t t_wait_events(struct sc_conn *c, int want, unsigned limit_ms, const char *what);
uint64_t t_now_us(void);
void t_sleep_ms(unsigned ms);
long t_raise_nofile(void);                   /* soft = hard; returns the limit */

/* $SC_TEST_SANITIZER ("asan", "tsan") or NULL. */
const char *t_sanitizer(void);
/* normal, or under_san when running under a sanitizer */
uint64_t t_scale(uint64_t normal, uint64_t under_san);

/* Full read/write on plain fds (pipes), failing on error or short EOF. */
void t_write_full(int fd, const void *buf, size_t len);
void t_read_full(int fd, void *buf, size_t len);

/* Names in /dev/shm, newline-separated in a malloc'ed string (sorted). */
char *t_shm_list(void);

#endif /* T_UTIL_H */
