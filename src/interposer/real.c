/* SPDX-License-Identifier: MIT */
/*
 * The real libc functions behind the ones we define (calls.h), found with
 * dlsym(RTLD_NEXT) on first use.  A function the process does not have
 * (liburing's, when the program does not link it) stays NULL: its shim is
 * then only ever reached by a program that has it.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "interposer.h"

#define SC_REAL_DEF(f, file) __typeof__(f) *real_##f;
#define SC_REAL_DEFT(f, file, type) sc_real_t_##f *real_##f;
SC_CALLS(SC_REAL_DEF, SC_REAL_DEFT)

pthread_once_t real_once = PTHREAD_ONCE_INIT;
_Atomic bool real_ready;

void real_init(void)
{
#define SC_REAL_LOAD(f, file) real_##f = (__typeof__(real_##f))dlsym(RTLD_NEXT, #f);
#define SC_REAL_LOADT(f, file, type) SC_REAL_LOAD(f, file)
	SC_CALLS(SC_REAL_LOAD, SC_REAL_LOADT)
	if (!real_fcntl64)      /* an older libc: fcntl is the 64-bit one */
		real_fcntl64 = real_fcntl;
	/* release: the pointers above before R's acquire sees it */
	atomic_store_explicit(&real_ready, true, memory_order_release);
}
