/* SPDX-License-Identifier: MIT */
/* The process's pid, cached (compat.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "compat.h"

_Atomic int32_t sc__cached_pid;

void sc__pid_reset(void)
{
	/* relaxed: the fork child's only thread (its atfork handler) */
	atomic_store_explicit(&sc__cached_pid, 0, memory_order_relaxed);
}

static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_init(void)
{
	pthread_atfork(NULL, NULL, sc__pid_reset);
}

int32_t sc__pid_slow(void)
{
	pthread_once(&pid_once, pid_init);
	int32_t p = getpid();
	atomic_store_explicit(&sc__cached_pid, p, memory_order_relaxed);
	return p;
}
