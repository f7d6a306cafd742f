/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the control messages a peer sends on a link group's
 * socket (issue 15): HELLO with its segment, OPEN, CELL with a wake socket,
 * CLOSE, SWITCH, DEVMEM, KICK, garbage, short and zero-length messages,
 * with or without fds attached.  The accepting side's group reads them
 * (sc__group_pump_locked, as the control thread does) and must neither
 * crash (ASan, UBSan) nor keep any fd it was passed once the group is gone.
 *
 * Input: records of one flags byte and one struct sc_msg (48 bytes):
 *   bit 0  attach a memfd of seg_size bytes (capped at 64 MB)
 *   bit 1  ... sealed against shrinking and growing (as a segment must be)
 *   bit 2  send a zero-length message instead (fds still attached)
 *   bit 3  send only the first (flags >> 4) * 3 bytes
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "ctl.h"
#include "link.h"

static int fd_count(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static void send_one(int sock, uint8_t flags, const struct sc_msg *m)
{
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } u;
	size_t len = flags & 4 ? 0 : flags & 8 ? (size_t)(flags >> 4) * 3 : sizeof(*m);
	struct iovec iov = { (void *)m, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fd = -1;

	if (flags & 1) {
		uint64_t size = m->seg_size <= (64u << 20) ? m->seg_size : 4096;
		fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
			abort();
		if (flags & 2)
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	sendmsg(sock, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (fd >= 0)
		close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	int sv[2];
	int fds0 = fd_count();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	struct sc_group *g = sc__group_alloc(1, sv[0]);
	if (!g)
		abort();
	g->peer_pid = getpid();
	/* a few records at a time, then the group reads them */
	while (n > 0) {
		for (int k = 0; k < 8 && n > 0; k++) {
			struct sc_msg m = { 0 };
			uint8_t flags = *d++;
			n--;
			size_t l = n < sizeof(m) ? n : sizeof(m);
			memcpy(&m, d, l);
			d += l;
			n -= l;
			send_one(sv[1], flags, &m);
		}
		struct sc_conn *refused = NULL;
		pthread_mutex_lock(&g->lock);
		sc__group_pump_locked(g, &refused);
		bool dead = g->dead;
		pthread_mutex_unlock(&g->lock);
		sc__group_finish_refused(refused);
		if (dead)
			break;
	}
	/* every connection went to the refused list (no listener): the group
	 * is ours to free, with all it holds */
	close(sv[1]);
	sc__group_free(g);
	int fds = fd_count();
	if (fds != fds0) {
		fprintf(stderr, "fuzz_msg: %d fds before, %d after\n", fds0, fds);
		abort();
	}
	return 0;
}
