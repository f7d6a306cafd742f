/* SPDX-License-Identifier: MIT */
/* Multipath TCP at both ends (IPPROTO_MPTCP: Go 1.24's listeners,
 * `mptcpize run`): between two programs of one host a TCP connection like
 * any other, accelerated (issue 26; before, is_tcp_type refused the
 * protocol and the connection stayed on the kernel's MPTCP).  The
 * listener keeps no SYN (TCP_SAVE_SYN: EOPNOTSUPP), so the acceptor looks
 * for the offer while a client is connecting. */
#define SERVER_PROTO IPPROTO_MPTCP
#define CLIENT_PROTO IPPROTO_MPTCP
#include "mptcp_pair.h"
