// SPDX-License-Identifier: MIT
/*
 * sockmap CGROUP OBJECT: load the bench's sockmap programs (sockmap.bpf.c)
 * and attach them to the cgroup v2 directory CGROUP (the sockops program)
 * and to their SOCKHASH (the sk_msg program); print "ready", then hold
 * until stdin ends (or SIGTERM), print the counts as one JSON line
 * ({"inserted": N, "redirected": N, "missed": N}), detach and exit.  Only
 * the processes the caller puts in CGROUP are touched.  Exit 77 when this
 * machine cannot do it (not root, no BPF, no sockmap), saying why.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "sockmap: %s: %s\n", what, strerror(err));
	return err == EPERM || err == EACCES || err == ENOSYS || err == EINVAL || err == ENOENT ?
	       77 : 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: sockmap CGROUP OBJECT\n");
		return 2;
	}
	libbpf_set_print(NULL);
	struct bpf_object *obj = bpf_object__open_file(argv[2], NULL);
	if (!obj)
		return fail(argv[2], errno);
	if (bpf_object__load(obj))
		return fail("loading the programs", errno);
	struct bpf_program *ops = bpf_object__find_program_by_name(obj, "sm_sockops");
	struct bpf_program *msg = bpf_object__find_program_by_name(obj, "sm_msg");
	int socks = bpf_object__find_map_fd_by_name(obj, "socks");
	int counts = bpf_object__find_map_fd_by_name(obj, "counts");
	if (!ops || !msg || socks < 0 || counts < 0)
		return fail("the object's programs and maps", ENOENT);
	int cg = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return fail(argv[1], errno);
	if (bpf_prog_attach(bpf_program__fd(msg), socks, BPF_SK_MSG_VERDICT, 0))
		return fail("attaching sk_msg", errno);
	if (bpf_prog_attach(bpf_program__fd(ops), cg, BPF_CGROUP_SOCK_OPS, 0))
		return fail("attaching sockops to the cgroup", errno);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	printf("ready\n");
	fflush(stdout);
	char buf[64];
	while (!stop && read(0, buf, sizeof(buf)) > 0)
		;
	__u64 v[3] = { 0, 0, 0 };
	for (__u32 i = 0; i < 3; i++)
		bpf_map_lookup_elem(counts, &i, &v[i]);
	bpf_prog_detach2(bpf_program__fd(ops), cg, BPF_CGROUP_SOCK_OPS);
	bpf_prog_detach2(bpf_program__fd(msg), socks, BPF_SK_MSG_VERDICT);
	printf("{\"inserted\": %llu, \"redirected\": %llu, \"missed\": %llu}\n",
	       (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2]);
	fflush(stdout);
	close(cg);
	bpf_object__close(obj);
	return 0;
}
