/* SPDX-License-Identifier: MIT */
/* A Multipath TCP listener and a plain TCP client (a Go 1.24 server and
 * a C client): the kernel makes the accepted socket a TCP fallback, which
 * keeps no SYN either; accelerated all the same (issue 26). */
#define SERVER_PROTO IPPROTO_MPTCP
#define CLIENT_PROTO IPPROTO_TCP
#include "mptcp_pair.h"
