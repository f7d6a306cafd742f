/* SPDX-License-Identifier: MIT */
/*
 * Which TCP ports of the run directory have ever had an accelerated
 * listener: a bit per port in <rundir>/ports-v5 (8 KiB, shared).  A
 * listener sets its port's bit before it makes or writes the port's offer
 * board; a client that finds the bit clear knows there is no board to open
 * and stays on TCP (no_listener) without a system call.  Every connection
 * to a plain server, another host or a port nobody listens on with the
 * library went through a failed open() of the board (a negative dentry
 * made and dropped, with the run directory's lock) and cost 0.89x kernel
 * TCP's connection rate.
 *
 * Bits are only set: a board removed by a collection leaves its bit, and
 * the next client's open() finds it gone, as before.  Anything amiss with
 * the file (another user's, the wrong size, not mappable) and every port
 * counts as listened on: the board's open() decides, as before.  A
 * process of the group may clear bits (it could remove boards as well):
 * that costs acceleration, never a byte.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rundir.h"
#include "sys.h"

#define PORTS_SIZE (65536 / 8)

/* the map; PORTS_NONE: none (every port counts as listened on) */
static _Atomic uint64_t *_Atomic ports;
static uint64_t *const PORTS_NONE = (uint64_t *)1;

static _Atomic uint64_t *ports_map(void)
{
	_Atomic uint64_t *m = atomic_load_explicit(&ports, memory_order_acquire);
	if (m)
		return m == (void *)PORTS_NONE ? NULL : m;
	const char *d = sc__rundir();
	char path[320];
	struct stat st;
	void *p = MAP_FAILED;
	if (d && snprintf(path, sizeof(path), "%s/" SC_PORTS_FILE, d) < (int)sizeof(path)) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, sc__rundir_file_mode());
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && sc__rundir_file_ok(&st) &&
			    (st.st_size == PORTS_SIZE ||
			     (st.st_size == 0 && ftruncate(fd, PORTS_SIZE) == 0))) {
				if (st.st_size == 0)
					sc__rundir_file_made(fd);
				p = mmap(NULL, PORTS_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
				/* (a hole of a full tmpfs would raise SIGBUS) */
				if (p != MAP_FAILED && sc__backed(p, PORTS_SIZE) < 0) {
					munmap(p, PORTS_SIZE);
					p = MAP_FAILED;
				}
			}
			close(fd);
		}
	}
	_Atomic uint64_t *want = p == MAP_FAILED ? (void *)PORTS_NONE : p, *none = NULL;
	/* one mapping per process: another thread's won */
	/* (seq_cst, kept: release would do, for the acquire below) */
	if (!atomic_compare_exchange_strong_explicit(&ports, &none, want, memory_order_seq_cst,
						     memory_order_seq_cst) &&
	    want != (void *)PORTS_NONE)
		munmap(p, PORTS_SIZE);
	m = atomic_load_explicit(&ports, memory_order_acquire);
	return m == (void *)PORTS_NONE ? NULL : m;
}

void sc__port_mark(uint16_t port)
{
	_Atomic uint64_t *m = ports_map();
	uint64_t bit = 1ull << (port & 63);
	/* (seq_cst: before the board is made or written, as every client's
	 * look at the bit comes before its open of the board) */
	if (m && !(atomic_load_explicit(&m[port >> 6], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&m[port >> 6], bit, memory_order_seq_cst);
}

bool sc__port_listened(uint16_t port)
{
	_Atomic uint64_t *m = ports_map();
	/* seq_cst: the other side of sc__port_mark's */
	return !m || (atomic_load_explicit(&m[port >> 6], memory_order_seq_cst) >> (port & 63) & 1);
}
