/* SPDX-License-Identifier: MIT */
/* The peer's switch thread re-sends what we never read (blocking: we read
 * late); meanwhile the server's program sends more with sendmsg(), which
 * takes the plain path for an M_TCP socket without s->wlock.  The body:
 * resend_late_reader.h. */
// expect: switched 2
#define N2 1000
#define RECEIVED "received %zu"
#include "resend_late_reader.h"

static void tail(int fd)
{
	char buf[N2];
	pattern(buf, N2, N1, 16);
	struct iovec iv = { buf, N2 };
	struct msghdr m = { .msg_iov = &iv, .msg_iovlen = 1 };
	res("sendmsg tail", sendmsg(fd, &m, 0));
}
