/* SPDX-License-Identifier: MIT */
/* A Multipath TCP client and a plain TCP listener: the kernel makes the
 * connection plain TCP; the client cannot tag its SYN (IP_TTL: EOPNOTSUPP
 * on an MPTCP socket), and its untagged offer is claimed by its addresses
 * (before, the listener compared the SYN's TTL with the missing tag and
 * waited 200 ms for an offer that would never match, then declined). */
#define SERVER_PROTO IPPROTO_TCP
#define CLIENT_PROTO IPPROTO_MPTCP
#include "mptcp_pair.h"
