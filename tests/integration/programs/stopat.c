/* SPDX-License-Identifier: MIT */
/*
 * A test's hold on a process at a point of its own choosing, named by a
 * log line: preloaded after libshortcut (LD_PRELOAD="libshortcut.so.0
 * stopat.so"), this write() is what libshortcut's real write (found with
 * dlsym(RTLD_NEXT)) reaches.  The first write to fd 2 holding the text of
 * SC_STOPAT goes out, then that thread waits for ever: the test reads the
 * line, knows where the process is, and kills it there (SIGKILL, at any
 * set-up stage that SHORTCUT_LOG=3 names: after the claim of an offer,
 * once the OPEN went, ...).  Every other write passes through.
 *
 * Built by tests/integration/containers.py (stopat_lib).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real)(int, const void *, size_t);
	static atomic_int held;
	if (!real)
		real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	const char *at = getenv("SC_STOPAT");
	if (fd != 2 || !at || !*at || !memmem(buf, n, at, strlen(at)) ||
	    atomic_exchange(&held, 1))
		return real(fd, buf, n);
	ssize_t rc = real(fd, buf, n);
	/* held here until killed: the thread that logged, at that point */
	for (;;)
		pause();
	return rc;
}
