/* SPDX-License-Identifier: MIT */
/* exec() with data in flight both ways, the library kept: the client has
 * sent 70000 bytes the server has not read and has not read any of the
 * server's 100000 when it exec()s python3 (LD_PRELOAD kept) with the same
 * fd.  Python gets the server's 100000 and 2000 more sent after the exec,
 * exact and in order; the server gets the client's 70000 then python's 500,
 * exact and in order, then EOF (design brief, layer 5: the connection
 * switches back to TCP at a clean cut point).  The conversation:
 * exec_inflight_run (exec_common.h). */
// expect: switched 2
#include "exec_common.h"

int main(void)
{
	return exec_inflight_run(0, true);
}
