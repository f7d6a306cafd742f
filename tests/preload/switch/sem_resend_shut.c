/* SPDX-License-Identifier: MIT */
/* The peer's switch thread re-sends what we never read (blocking: we read
 * late); meanwhile the server's program shuts down writing, once the switch
 * is done: the client gets the 900000 bytes, then EOF.  The body:
 * resend_late_reader.h. */
// expect: switched 2
#define N2 0
#define RECEIVED "received %zu up to EOF"
#include "resend_late_reader.h"

static void tail(int fd)
{
	res("shutdown(SHUT_WR)", shutdown(fd, SHUT_WR));
}
