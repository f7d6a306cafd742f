/* SPDX-License-Identifier: MIT */
/*
 * The kernel's device-memory TCP and netdev netlink constants (Linux
 * 6.12+ / 6.16+), with the kernel's values.  This machine's headers are
 * Linux 6.1's and lack them: defined here, guarded so that newer headers
 * win.
 */
#ifndef SC_DEVMEM_UAPI_H
#define SC_DEVMEM_UAPI_H

#include <linux/types.h>

#ifndef MSG_SOCK_DEVMEM
#define MSG_SOCK_DEVMEM 0x2000000       /* receive payload as fragments */
#endif
#ifndef SO_DEVMEM_LINEAR
#define SO_DEVMEM_LINEAR 78
#define SCM_DEVMEM_LINEAR SO_DEVMEM_LINEAR
#endif
#ifndef SO_DEVMEM_DMABUF
#define SO_DEVMEM_DMABUF 79
#define SCM_DEVMEM_DMABUF SO_DEVMEM_DMABUF
#endif
#ifndef SO_DEVMEM_DONTNEED
#define SO_DEVMEM_DONTNEED 80
#endif

#ifndef SC_HAVE_DMABUF_CMSG
/* include/uapi/linux/uio.h */
struct sc_dmabuf_cmsg {
	__u64 frag_offset;      /* offset into the dmabuf where the frag starts */
	__u32 frag_size;        /* size of the frag */
	__u32 frag_token;       /* token representing this frag for DONTNEED */
	__u32 dmabuf_id;        /* dmabuf id this frag belongs to */
	__u32 flags;            /* currently unused */
};
struct sc_dmabuf_token {
	__u32 token_start;
	__u32 token_count;
};
#endif
#define SC_DONTNEED_MAX_TOKENS 128      /* per call (the kernel's) */
#define SC_DONTNEED_MAX_FRAGS 1024

/* Documentation/netlink/specs/netdev.yaml */
#ifndef NETDEV_CMD_BIND_RX
#define NETDEV_CMD_BIND_RX 13
#endif
#ifndef NETDEV_CMD_BIND_TX
#define NETDEV_CMD_BIND_TX 15
#endif
#define SC_NETDEV_A_DMABUF_IFINDEX 1
#define SC_NETDEV_A_DMABUF_QUEUES 2
#define SC_NETDEV_A_DMABUF_FD 3
#define SC_NETDEV_A_DMABUF_ID 4
#define SC_NETDEV_A_QUEUE_ID 1
#define SC_NETDEV_A_QUEUE_TYPE 3
#define SC_NETDEV_QUEUE_TYPE_RX 0
#define SC_NETDEV_QUEUE_TYPE_TX 1

#endif
