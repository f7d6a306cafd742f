// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * eBPF sockmap redirection, the kernel's own bypass of the TCP/IP stack
 * between local sockets (the Merbridge / istio-tcpip-bypass way), for the
 * bench's side-by-side column: a sockops program puts every established
 * IPv4 loopback socket of the bench's cgroup in a SOCKHASH, keyed by its
 * 4-tuple; an sk_msg program on that map redirects each send straight
 * into the peer socket's receive queue (bpf_msg_redirect_hash with
 * BPF_F_INGRESS).  counts: sockets inserted, sends redirected, sends whose
 * peer was not in the map (they go the normal way: never dropped).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct tuple {
	__u32 sip, dip;         /* network order */
	__u32 sport, dport;     /* host order */
};

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, 65536);
	__type(key, struct tuple);
	__type(value, __u32);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

static __always_inline void count(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* A remote port as the context gives it (network order, in the low or,
 * on older kernels, the high half of the word), in host order. */
static __always_inline __u32 rport(__u32 raw)
{
	return raw > 0xffff ? bpf_ntohs((__u16)(raw >> 16)) : bpf_ntohs((__u16)raw);
}

SEC("sockops")
int sm_sockops(struct bpf_sock_ops *skops)
{
	if (skops->family != 2 /* AF_INET */)
		return 1;
	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	if ((bpf_ntohl(skops->remote_ip4) >> 24) != 127)
		return 1;       /* loopback only */
	struct tuple k = { .sip = skops->local_ip4, .dip = skops->remote_ip4,
			   .sport = skops->local_port, .dport = rport(skops->remote_port) };
	if (bpf_sock_hash_update(skops, &socks, &k, BPF_NOEXIST) == 0)
		count(0);
	return 1;
}

SEC("sk_msg")
int sm_msg(struct sk_msg_md *msg)
{
	if (msg->family != 2)
		return SK_PASS;
	/* the peer's entry: its local end is our remote one */
	struct tuple k = { .sip = msg->remote_ip4, .dip = msg->local_ip4,
			   .sport = rport(msg->remote_port), .dport = msg->local_port };
	if (bpf_msg_redirect_hash(msg, &socks, &k, BPF_F_INGRESS) == SK_PASS)
		count(1);
	else
		count(2);
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
