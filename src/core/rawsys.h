/* SPDX-License-Identifier: MIT */
/*
 * A system call made with the instruction itself.  The interposer exports
 * syscall() (it acts on io_uring_setup, execve and close made through it),
 * so the library's own system calls must not go through that symbol: they
 * would reach the interposer's locks from inside the library.
 */
#ifndef SC_RAWSYS_H
#define SC_RAWSYS_H

#include <errno.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(SC_RAWSYS_GENERIC)
static inline long sc_raw_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	if ((unsigned long)ret > -4096ul) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}
#define SC_RAW_SYSCALL_IS_RAW 1
#else
/* (elsewhere libc's: the interposer's syscall() then acts on io_uring_setup
 * only, which the library never makes) */
static inline long sc_raw_syscall6(long nr, long a, long b, long c, long d, long e, long f)
{
	return syscall(nr, a, b, c, d, e, f);
}
#define SC_RAW_SYSCALL_IS_RAW 0
#endif

#define SC_SYSCALL(nr, a, b, c, d, e, f) \
	sc_raw_syscall6((nr), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

#endif
