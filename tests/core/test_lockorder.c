/* SPDX-License-Identifier: MIT */
/*
 * The lock-order check of the checking build (src/core/lockorder.c, built
 * here with SC_LOCK_ORDER): locks taken in rank order pass; one taken
 * while a lock of its rank or a later one is held aborts the process with
 * both named (run in a child, whose death by SIGABRT is the pass); an
 * LO_ALONE lock taken with another held aborts; ep_life's read lock may
 * be taken again, a trylock is never a breach, and a forgotten lock is not
 * checked any more.
 */
#define SC_LOCK_ORDER
#include "../../src/core/lockorder.c"

#include <signal.h>
#include <sys/wait.h>

#include "t_util.h"

static pthread_mutex_t set = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t sock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t alone = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t life = PTHREAD_RWLOCK_INITIALIZER;

static void ranks(void)
{
	sc__lo_rank(&set, LO_SET, "set");
	sc__lo_rank(&sock, LO_SOCK, "sock");
	sc__lo_rank(&alone, LO_ALONE, "alone");
	sc__lo_rank(&life, LO_EP_LIFE, "life");
}

/* fn run in a child: true if it died of SIGABRT (a breach reported). */
static bool aborts(int (*fn)(void *))
{
	pid_t pid = t_fork(fn, NULL);
	int st = t_wait_status(pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static int set_then_sock(void *arg)
{
	sc__lo_mutex_lock(&set, "here");
	sc__lo_mutex_lock(&sock, "here");
	sc__lo_mutex_unlock(&sock);
	sc__lo_mutex_unlock(&set);
	return 0;
}

static int sock_then_set(void *arg)
{
	sc__lo_mutex_lock(&sock, "here");
	sc__lo_mutex_lock(&set, "there");
	return 0;
}

static int two_of_a_rank(void *arg)
{
	static pthread_mutex_t other = PTHREAD_MUTEX_INITIALIZER;
	sc__lo_rank(&other, LO_SOCK, "another sock");
	sc__lo_mutex_lock(&sock, "here");
	sc__lo_mutex_lock(&other, "there");
	return 0;
}

static int alone_under_set(void *arg)
{
	sc__lo_mutex_lock(&set, "here");
	sc__lo_mutex_lock(&alone, "there");
	return 0;
}

static int set_under_alone(void *arg)
{
	sc__lo_mutex_lock(&alone, "here");
	sc__lo_mutex_lock(&set, "there");
	return 0;
}

static int write_under_read(void *arg)
{
	sc__lo_rdlock(&life, "here");
	sc__lo_wrlock(&life, "there");
	return 0;
}

T_TEST(in_order)
{
	T_ASSERT(!aborts(set_then_sock));
	set_then_sock(NULL);            /* (and here: nothing left held) */
	T_EQ(nheld, 0);
}

T_TEST(reversed)
{
	T_ASSERT(aborts(sock_then_set));
	T_ASSERT(aborts(two_of_a_rank));
}

T_TEST(alone)
{
	T_ASSERT(aborts(alone_under_set));
	T_ASSERT(aborts(set_under_alone));
	sc__lo_mutex_lock(&alone, "here");
	sc__lo_mutex_unlock(&alone);
}

T_TEST(read_again)
{
	sc__lo_rdlock(&life, "here");
	sc__lo_rdlock(&life, "again");
	sc__lo_mutex_lock(&set, "inside");
	sc__lo_mutex_unlock(&set);
	sc__lo_rwunlock(&life);
	sc__lo_rwunlock(&life);
	T_EQ(nheld, 0);
	T_ASSERT(aborts(write_under_read));
}

T_TEST(trylock)
{
	sc__lo_mutex_lock(&sock, "here");
	T_EQ(sc__lo_mutex_trylock(&set, "there"), 0);   /* never a deadlock */
	T_EQ(nheld, 2);
	sc__lo_mutex_unlock(&set);
	sc__lo_mutex_unlock(&sock);
	T_EQ(nheld, 0);
}

T_TEST(forget)
{
	static pthread_mutex_t gone = PTHREAD_MUTEX_INITIALIZER;
	sc__lo_rank(&gone, LO_EPS, "gone");
	sc__lo_forget(&gone);
	sc__lo_mutex_lock(&sock, "here");
	sc__lo_mutex_lock(&gone, "there");      /* unranked: not checked */
	sc__lo_mutex_unlock(&gone);
	sc__lo_mutex_unlock(&sock);
	T_EQ(nheld, 0);
}

T_MAIN(ranks, T_ENTRY(in_order), T_ENTRY(reversed), T_ENTRY(alone), T_ENTRY(read_again),
       T_ENTRY(trylock), T_ENTRY(forget))
