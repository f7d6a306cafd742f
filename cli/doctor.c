/* SPDX-License-Identifier: MIT */
/*
 * shortcut doctor [--json] [PROGRAM]: what acceleration needs on this
 * host, tried rather than guessed (each kernel feature is used as the
 * library uses it, the run directory is written as the library writes
 * it), one line per check saying what is wrong and how to fix it.  Exit 0
 * when every check is ok, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "rundir.h"
#include "shortcut.h"

enum level { OK, WARN, FAIL };
static const char *const level_name[] = { "ok", "warn", "fail" };

#define MAX_CHECKS 24
static struct check {
	const char *name;
	enum level level;
	char detail[480];
	char fix[240];
} checks[MAX_CHECKS];
static int nchecks;

static void report(const char *name, enum level lv, const char *fix, const char *fmt, ...)
{
	if (nchecks >= MAX_CHECKS)
		return;
	struct check *c = &checks[nchecks++];
	va_list ap;
	c->name = name;
	c->level = lv;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
}

/* ---- containers ------------------------------------------------------------ */

static uint64_t ns_ino(const char *which)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/self/ns/%s", which);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* A user namespace other than the initial one: its uid_map is not the
 * identity over every uid. */
static bool in_user_ns(void)
{
	FILE *f = fopen("/proc/self/uid_map", "r");
	unsigned long a, b, n;
	bool init = f && fscanf(f, "%lu %lu %lu", &a, &b, &n) == 3 && a == 0 && b == 0 &&
		    n == 4294967295ul;
	if (f)
		fclose(f);
	return f && !init;
}

/* A container's own root filesystem: what the engine marks (Docker,
 * Podman) and an overlay root. */
static bool container_root(const char *type)
{
	return (access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 ||
		access("/var/run/secrets/kubernetes.io", F_OK) == 0) &&
	       (!strcmp(type, "overlay") || !strcmp(type, "fuse-overlayfs") ||
		!strcmp(type, "aufs") || !strcmp(type, "btrfs") || !strcmp(type, "zfs"));
}

/* The mount the run directory is on (/proc/self/mountinfo): its root
 * within its filesystem, mount point, type and source. */
static bool rundir_mount(const char *dir, char *root, char *mnt, char *type, char *src)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[1024];
	size_t best = 0;
	bool found = false;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char r[256], m[256], t[64], s[256];
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*d %*d %*s %255s %255s", r, m) != 2 ||
		    sscanf(dash + 3, "%63s %255s", t, s) != 2)
			continue;
		size_t l = strlen(m);
		bool under = !strcmp(m, "/") || (!strncmp(dir, m, l) && (dir[l] == '/' || !dir[l]));
		if (under && l >= best) {
			best = l;
			strcpy(root, r);
			strcpy(mnt, m);
			strcpy(type, t);
			strcpy(src, s);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Whom this process shares the run directory with across PID namespaces,
 * whether it runs in a user namespace, and whether the run directory can
 * be shared at all (separate containers with no shared run directory
 * are on TCP, and must not be told all is well). */
static void check_containers(void)
{
	const char *dir = sc__rundir();
	uint64_t pidns = ns_ino("pid");
	struct sc_proc *ps = calloc(4096, sizeof(*ps));
	int n = dir && ps ? sc__procs_live(ps, 4096) : 0, others = 0, nsn = 0;
	uint64_t seen[64];
	for (int i = 0; i < n; i++) {
		if (ps[i].pidns == pidns)
			continue;
		others++;
		bool known = false;
		for (int k = 0; k < nsn; k++)
			known |= seen[k] == ps[i].pidns;
		if (!known && nsn < 64)
			seen[nsn++] = ps[i].pidns;
	}
	free(ps);
	report("pid-ns", OK, NULL, "pid %d in its PID namespace; processes are known by "
	       "identity, not pid, so peers in other PID namespaces (containers) are "
	       "accelerated if they share the run directory: %d live processes of %d other "
	       "PID namespaces do now", (int)getpid(), others, nsn);
	if (in_user_ns())
		report("user-ns", sc__cfg.group_set ? OK : WARN,
		       sc__cfg.group_set ? NULL : "run the peers with uids that map to the same "
		       "uid, or share the run directory by a group (SHORTCUT_GROUP)",
		       "a user namespace: peers are accelerated only if they are the same user "
		       "as seen here (uid %u)%s", (unsigned)geteuid(),
		       sc__cfg.group_set ? ", or in SHORTCUT_GROUP" : "");
	char root[256], mnt[256], type[64], src[256];
	if (!dir || !rundir_mount(dir, root, mnt, type, src))
		return;
	char r0[256], m0[256], t0[64], s0[256];
	bool contained = rundir_mount("/", r0, m0, t0, s0) && container_root(t0);
	if (!contained)
		return;         /* (not a container's: the host's directories are shared) */
	if (!strcmp(mnt, "/"))
		report("rundir-shared", WARN, "bind-mount one host directory into every container "
		       "that should be accelerated and set SHORTCUT_RUNDIR to it on each side, "
		       "or use the CDI device (docs/containers.md)",
		       "%s is on this container's own root filesystem (%s): no other container "
		       "sees it, so connections to other containers stay on TCP", dir, type);
	else if (!strcmp(mnt, "/dev/shm"))
		report("rundir-shared", OK, NULL, "%s is on /dev/shm (%s): shared with the containers "
		       "of this IPC namespace (a pod's); others need a shared run directory "
		       "(docs/containers.md)", dir, type);
	else
		report("rundir-shared", OK, NULL, "%s is on a mount from outside this container "
		       "(%s %s%s, at %s): shared with the containers that mount it too", dir, type,
		       src, strcmp(root, "/") ? root : "", mnt);
}

/* ---- kernel features ----------------------------------------------------- */

/* A link group's segment: a sealed memfd, mapped shared; the futex a
 * blocked call sleeps on lives in it.  Both in one probe. */
static void check_memfd_futex(void)
{
	int fd = memfd_create("shortcut-doctor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		report("memfd", FAIL, errno == ENOSYS ? "a kernel of 3.17 or later" :
		       "allow memfd_create (a seccomp profile of the container runtime?)",
		       "memfd_create: %s: link groups cannot be made", strerror(errno));
		report("futex", FAIL, NULL, "not tried (needs a shared segment)");
		return;
	}
	_Atomic uint32_t *w = MAP_FAILED;
	int rc = ftruncate(fd, 4096) < 0 ? -errno : 0;
	if (!rc && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		rc = -errno;
	if (!rc && (w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		rc = -errno;
	close(fd);
	if (rc) {
		report("memfd", FAIL, "check memory limits (ulimit -v, the cgroup's memory.max)",
		       "a sealed memfd cannot be sized, sealed and mapped: %s", strerror(-rc));
		report("futex", FAIL, NULL, "not tried (needs a shared segment)");
		return;
	}
	report("memfd", OK, NULL, "memfd_create, seals and shared mappings work");
	/* a wake with no sleeper: 0; a wait on a word that changed: EAGAIN */
	atomic_store(w, 1);
	long woke = syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0);
	int werr = woke < 0 ? errno : 0;
	long waited = syscall(SYS_futex, w, FUTEX_WAIT, 0, NULL, NULL, 0);
	int err = waited < 0 ? errno : 0;
	munmap((void *)w, 4096);
	if (woke == 0 && waited < 0 && err == EAGAIN)
		report("futex", OK, NULL, "shared futexes work");
	else
		report("futex", FAIL, "allow the futex system call (a seccomp profile?)",
		       "futex on a shared mapping: %s: blocked calls cannot sleep",
		       strerror(werr ? werr : err ? err : EPROTO));
}

/* The segment goes to the peer over a SOCK_SEQPACKET Unix socket with
 * SCM_RIGHTS. */
static void check_fd_passing(void)
{
	int sv[2], memfd = -1, got = -1;
	int rc = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ? -errno : 0;
	if (rc) {
		report("fd-passing", FAIL, "allow AF_UNIX SOCK_SEQPACKET sockets (seccomp, LSM)",
		       "socketpair(AF_UNIX, SOCK_SEQPACKET): %s", strerror(-rc));
		return;
	}
	memfd = memfd_create("shortcut-doctor", MFD_CLOEXEC);
	char byte = 'x', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &memfd, sizeof(int));
	if (memfd < 0 || sendmsg(sv[0], &m, MSG_NOSIGNAL) != 1)
		rc = -errno;
	memset(cbuf, 0, sizeof(cbuf));
	if (!rc && recvmsg(sv[1], &m, MSG_CMSG_CLOEXEC) != 1)
		rc = -errno;
	c = CMSG_FIRSTHDR(&m);
	if (!rc && (!c || c->cmsg_type != SCM_RIGHTS))
		rc = -EPROTO;
	if (!rc)
		memcpy(&got, CMSG_DATA(c), sizeof(int));
	if (got >= 0)
		close(got);
	if (memfd >= 0)
		close(memfd);
	close(sv[0]);
	close(sv[1]);
	if (rc)
		report("fd-passing", FAIL, "allow SCM_RIGHTS on Unix sockets (an LSM policy?)",
		       "passing a memfd with SCM_RIGHTS: %s", strerror(-rc));
	else
		report("fd-passing", OK, NULL, "SOCK_SEQPACKET Unix sockets pass a segment (SCM_RIGHTS)");
}

/* Listen with TCP_SAVE_SYN, connect with the client's mark (IP_TOS
 * SC_SYN_TOS), and read the mark in the accepted connection's saved SYN:
 * exactly what the interposer does on each side. */
static int syn_probe(int family, int *tos_seen)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int one = 1, tos = SC_SYN_TOS, l = -1, c = -1, a = -1, rc = 0;
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	if ((l = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(l, (struct sockaddr *)&ss, sl) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		goto out;
	}
	if (setsockopt(l, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one)) < 0) {
		rc = -ENOPROTOOPT;
		goto out;
	}
	if ((c = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		rc = -errno;
		goto out;
	}
	if (setsockopt(c, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6,
		       family == AF_INET ? IP_TOS : IPV6_TCLASS, &tos, sizeof(tos)) < 0) {
		rc = -EPERM;
		goto out;
	}
	/* loopback, a listener with room: connect completes at once */
	if (connect(c, (struct sockaddr *)&ss, sl) < 0 || (a = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0) {
		rc = -errno;
		goto out;
	}
	uint8_t syn[128];
	socklen_t n = sizeof(syn);
	if (getsockopt(a, IPPROTO_TCP, TCP_SAVED_SYN, syn, &n) < 0 || n < 2) {
		rc = -ENODATA;
		goto out;
	}
	*tos_seen = (syn[0] >> 4) == 4 ? syn[1] : ((syn[0] & 0x0f) << 4 | syn[1] >> 4);
out:
	if (a >= 0)
		close(a);
	if (c >= 0)
		close(c);
	if (l >= 0)
		close(l);
	return rc;
}

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	int rc = fscanf(f, "%d", v) == 1 ? 0 : -EINVAL;
	fclose(f);
	return rc;
}

static void check_syn(void)
{
	int tos4 = -1, tos6 = -1;
	int rc4 = syn_probe(AF_INET, &tos4);
	int rc6 = syn_probe(AF_INET6, &tos6);
	bool v6 = rc6 != -EAFNOSUPPORT && rc6 != -EADDRNOTAVAIL;   /* IPv6 there at all */
	int rc = rc4 ? rc4 : v6 ? rc6 : 0;
	if (rc == -ENOPROTOOPT) {
		report("tcp-save-syn", FAIL, "a kernel of 4.2 or later",
		       "setsockopt(TCP_SAVE_SYN) refused: a server cannot tell an accelerated "
		       "client's SYN");
		return;
	}
	if (rc == -ENODATA) {
		int cookies = 0;
		read_int_file("/proc/sys/net/ipv4/tcp_syncookies", &cookies);
		report("tcp-save-syn", FAIL, cookies == 2 ? "sysctl net.ipv4.tcp_syncookies=1" :
		       "check the kernel's TCP settings (sysctl net.ipv4)",
		       "no saved SYN on an accepted loopback connection%s: every connection "
		       "stays on TCP", cookies == 2 ? " (tcp_syncookies=2 sends every "
		       "connection through SYN cookies)" : "");
		return;
	}
	if (rc == -EPERM) {
		report("tcp-save-syn", OK, NULL, "TCP_SAVE_SYN works");
		report("syn-mark", FAIL, "allow IP_TOS / IPV6_TCLASS on TCP sockets",
		       "a client cannot set IP_TOS on its socket: it cannot mark its SYN");
		return;
	}
	if (rc) {
		report("tcp-save-syn", FAIL, "check loopback (ip link set lo up) and socket policy",
		       "a TCP connection over loopback failed: %s", strerror(-rc));
		return;
	}
	report("tcp-save-syn", OK, NULL, "TCP_SAVE_SYN works%s", v6 ? " (IPv4 and IPv6)" :
	       " (IPv4; no IPv6 loopback)");
	int bad = (tos4 & 0xfc) != SC_SYN_TOS ? tos4 : v6 && (tos6 & 0xfc) != SC_SYN_TOS ? tos6 : -1;
	if (bad >= 0)
		report("syn-mark", FAIL, "remove the rule that rewrites DSCP on lo (nft list ruleset; "
		       "iptables -t mangle -S)", "a SYN marked 0x%02x arrives as 0x%02x: servers "
		       "take accelerated clients for plain ones (fallback peer_not_accelerated)",
		       SC_SYN_TOS, bad);
	else
		report("syn-mark", OK, NULL, "a SYN's DSCP mark (TOS 0x%02x) reaches the server", SC_SYN_TOS);
}

static void check_close_range(void)
{
	/* first > last: EINVAL from a kernel that has it, ENOSYS otherwise */
	long r = syscall(SYS_close_range, 1u, 0u, 0u);
	if (r < 0 && errno == EINVAL)
		report("close_range", OK, NULL, "close_range exists (closefrom spares the library's own fds)");
	else
		report("close_range", WARN, errno == ENOSYS ? "a kernel of 5.9 or later" :
		       "allow close_range (a seccomp profile?)", "close_range: %s: a program's "
		       "closefrom() falls back to closing every fd, the library's own with them",
		       r < 0 ? strerror(errno) : "no error for an empty range");
}

/* ---- the run directory --------------------------------------------------- */

static const char *fs_name(long type)
{
	switch ((unsigned long)type) {
	case 0x01021994: return "tmpfs";
	case 0xef53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683e: return "btrfs";
	case 0x794c7630: return "overlayfs";
	case 0x6969: return "nfs";
	case 0x01021997: return "9p";
	case 0x65735546: return "fuse";
	case 0xff534d42: return "cifs";
	case 0x73717368: return "squashfs";
	default: return NULL;
	}
}

/* Everything the library does in the run directory, on a file of our own:
 * a sparse board (mapped shared, atomics), an OFD lock (listener entries),
 * flock (stats files), a Unix socket bound by path (rendezvous). */
static int fs_probe(const char *dir, const char **what)
{
	char path[PATH_MAX];
	int rc = 0, fd = -1, s = -1;
	void *m = MAP_FAILED;
	size_t size = 4u << 20;

	snprintf(path, sizeof(path), "%s/doctor-%d", dir, (int)getpid());
	*what = "creating a file";
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	unlink(path);
	*what = "sizing a sparse file";
	if (ftruncate(fd, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	*what = "mapping a file shared";
	m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	atomic_store((_Atomic uint64_t *)m + size / 16, 42);
	*what = "an OFD lock";
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		rc = -errno;
		goto out;
	}
	*what = "flock";
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		goto out;
	}
	*what = "binding a Unix socket";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.80s/d-%d.sock", dir, (int)getpid());
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		goto out;
	}
	unlink(sa.sun_path);
out:
	if (s >= 0)
		close(s);
	if (m != MAP_FAILED)
		munmap(m, size);
	close(fd);
	return rc;
}

static void check_rundir(void)
{
	char dir[256];
	struct stat st;
	bool created = false;

	if (sc__rundir_choose(dir, sizeof(dir))) {
		report("rundir", FAIL, "set SHORTCUT_RUNDIR to a shorter path", "%.100s: %d bytes "
		       "or longer (a Unix socket name in it must fit)", dir, SC_RUNDIR_MAX);
		return;
	}
	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT || !sc__rundir()) {
			report("rundir", FAIL, "set SHORTCUT_RUNDIR to a directory this user can create",
			       "%s", sc__rundir_error());
			return;
		}
		created = true;         /* as the first accelerated process would */
		if (lstat(dir, &st) < 0) {
			report("rundir", FAIL, NULL, "%s: %s", dir, strerror(errno));
			return;
		}
	}
	if (S_ISLNK(st.st_mode)) {
		report("rundir", FAIL, "point SHORTCUT_RUNDIR at the directory itself",
		       "%s is a symbolic link: the library refuses it (another user could "
		       "point it elsewhere)", dir);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		report("rundir", FAIL, "remove it, or set SHORTCUT_RUNDIR to a directory",
		       "%s is not a directory", dir);
		return;
	}
	bool grp = sc__cfg.group_set && st.st_gid == sc__cfg.group_gid;
	if (st.st_uid != geteuid() && !grp) {
		report("rundir", FAIL, "run both ends as its owner, set SHORTCUT_RUNDIR to a "
		       "directory of this user's on both sides, or share one by a group "
		       "(SHORTCUT_GROUP, docs/containers.md)", "%s is owned by uid %u, not by "
		       "this user (uid %u): the library refuses it", dir, (unsigned)st.st_uid,
		       (unsigned)geteuid());
		return;
	}
	if (grp) {
		if ((st.st_mode & 07777) != 02770) {
			char fix[600];
			snprintf(fix, sizeof(fix), "chgrp %u %s && chmod 2770 %s",
				 (unsigned)sc__cfg.group_gid, dir, dir);
			report("rundir", (st.st_mode & S_IWOTH) ? FAIL : WARN, fix, "%s has mode "
			       "%04o, not 2770 (SHORTCUT_GROUP's users share it)", dir,
			       (unsigned)(st.st_mode & 07777));
		} else {
			report("rundir", OK, NULL, "%s: %s, group %u's (SHORTCUT_GROUP), mode 2770",
			       dir, created ? "created now" : "exists", (unsigned)sc__cfg.group_gid);
		}
	} else if ((st.st_mode & 07777) != 0700) {
		char fix[300];
		snprintf(fix, sizeof(fix), "chmod 700 %s", dir);
		report("rundir", WARN, fix, "%s has mode %04o, not 0700: other users can read its "
		       "offer boards and counters", dir, (unsigned)(st.st_mode & 07777));
	} else {
		report("rundir", OK, NULL, "%s: %s, this user's, mode 0700", dir,
		       created ? "created now" : "exists");
	}
	struct statfs sf;
	const char *fs = statfs(dir, &sf) == 0 ? fs_name((long)sf.f_type) : NULL;
	char fsbuf[32];
	if (!fs) {
		snprintf(fsbuf, sizeof(fsbuf), "filesystem 0x%lx", (unsigned long)sf.f_type);
		fs = fsbuf;
	}
	const char *what;
	int rc = fs_probe(dir, &what);
	if (rc)
		report("rundir-fs", FAIL, "set SHORTCUT_RUNDIR to a directory on a local "
		       "filesystem (tmpfs: /run/user/UID)", "%s (%s): %s: %s", dir, fs, what,
		       strerror(-rc));
	else
		report("rundir-fs", OK, NULL, "%s: shared mappings, OFD locks, flock and Unix "
		       "sockets work", fs);
	char off[300];
	snprintf(off, sizeof(off), "%s/%s", dir, SC_OFF_FILE);
	if (access(off, F_OK) == 0)
		report("switch", WARN, "shortcut on", "acceleration is off (shortcut off): every "
		       "connection stays on TCP");
	else
		report("switch", OK, NULL, "acceleration is on (shortcut off turns it off)");
}

/* ---- limits, policies, environment ---------------------------------------- */

static void check_fds(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		report("fd-limit", FAIL, NULL, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
		return;
	}
	/* the interposer's rule (handshake.c): a new connection is accelerated
	 * while its fd + 64 < 3/4 of the soft limit; a blocking client or a
	 * server spends that one fd on it, an event-driven client two (the
	 * socket and its claim eventfd) */
	long lim = rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
	long conns = lim - lim / 4 - 64;
	if (conns < 0)
		conns = 0;
	char hard[32], fix[120];
	if (rl.rlim_max == RLIM_INFINITY)
		snprintf(hard, sizeof(hard), "unlimited");
	else
		snprintf(hard, sizeof(hard), "%llu", (unsigned long long)rl.rlim_max);
	snprintf(fix, sizeof(fix), "ulimit -n %s (or LimitNOFILE= in a systemd unit)",
		 rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= 65536 ? "65536" : hard);
	report("fd-limit", conns < 256 ? WARN : OK, conns < 256 ? fix : NULL,
	       "RLIMIT_NOFILE %ld (hard %s): about %ld accelerated connections per process "
	       "(%ld for an event-driven client), then new ones stay on TCP (fallback limits)",
	       lim, hard, conns, conns / 2);
}

static void check_policies(void)
{
	if (access("/proc/self/exe", R_OK) < 0 || access("/proc/self/fd", R_OK) < 0) {
		report("proc", FAIL, "mount /proc", "/proc is not mounted: shortcut run cannot "
		       "find its library and processes cannot tell live peers");
		return;
	}
	int yama = -1, seccomp = -1;
	read_int_file("/proc/sys/kernel/yama/ptrace_scope", &yama);
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &seccomp) == 1)
			break;
	if (f)
		fclose(f);
	char ys[64];
	if (yama >= 0)
		snprintf(ys, sizeof(ys), "yama ptrace_scope %d does not matter", yama);
	else
		snprintf(ys, sizeof(ys), "no yama");
	report("policies", OK, NULL, "/proc mounted; ptrace not needed (segments go by "
	       "SCM_RIGHTS), %s; %s", ys, seccomp > 0 ? "a seccomp filter is on (the probes "
	       "above ran under it)" : "no seccomp filter");
}

static void check_env(void)
{
	const char *pre = getenv("LD_PRELOAD");
	if (pre && *pre)
		report("ld-preload", WARN, "unset LD_PRELOAD, or make sure it interposes no socket "
		       "calls", "LD_PRELOAD is set (%.200s): shortcut run puts libshortcut first; "
		       "another socket interposer (Onload, libvma) would fight it", pre);
	else
		report("ld-preload", OK, NULL, "LD_PRELOAD is not set");
	if (sc_config_check())
		report("config", FAIL, "correct the variable named above (README, Configuration)",
		       "a SHORTCUT_* variable is invalid: nothing would be accelerated");
	else
		report("config", OK, NULL, "the SHORTCUT_* variables are valid");
	char lib[PATH_MAX];
	if (sc__find_lib(lib, sizeof(lib)))
		report("library", FAIL, "reinstall shortcut (make install, or the package)",
		       "%s not found beside the shortcut binary nor in %s from it", SC_SONAME,
		       SC_LIBDIR_REL);
	else
		report("library", OK, NULL, "shortcut run preloads %s", lib);
}

static void check_target(const char *prog)
{
	struct sc_target t;
	int rc = sc__target_check(prog, &t);
	if (rc) {
		report("program", FAIL, "give a path, or a command in PATH", "%s: %s", prog,
		       strerror(-rc));
		return;
	}
	for (int k = 0; k < t.n; k++)
		report("program", WARN, t.f[k].fix, "%s: %s", t.path, t.f[k].what);
	if (!t.n)
		report("program", OK, NULL, "%s: the loader will preload libshortcut into it%s", t.path,
		       t.note);
}

/* ---- output -------------------------------------------------------------- */

static int usage(FILE *f, int status)
{
	fputs("usage: shortcut doctor [--json] [PROGRAM]\n"
	      "  checks what acceleration needs on this host (and, given PROGRAM, whether\n"
	      "  the loader will preload into it); exit 0 if all is well, 1 if not\n"
	      "  --json   one JSON object: {\"ok\": ..., \"checks\": [...]}\n", f);
	return status;
}

int sc__doctor_main(int argc, char **argv)
{
	bool json = false;
	const char *prog = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else if (argv[i][0] == '-' || prog) {
			fprintf(stderr, "shortcut doctor: unknown argument '%s' (options: --json; "
				"one PROGRAM at most)\n", argv[i]);
			return usage(stderr, 2);
		} else
			prog = argv[i];
	}
	check_env();
	check_memfd_futex();
	check_fd_passing();
	check_syn();
	check_close_range();
	check_rundir();
	check_containers();
	check_fds();
	check_policies();
	if (prog)
		check_target(prog);

	int bad = 0;
	for (int i = 0; i < nchecks; i++)
		bad += checks[i].level != OK;
	if (json) {
		struct utsname u;
		printf("{\"version\": \"%s\", \"kernel\": ", SC_VERSION);
		sc__json_str(uname(&u) == 0 ? u.release : "");
		printf(", \"ok\": %s, \"checks\": [", bad ? "false" : "true");
		for (int i = 0; i < nchecks; i++) {
			printf("%s{\"name\": \"%s\", \"status\": \"%s\", \"detail\": ", i ? ", " : "",
			       checks[i].name, level_name[checks[i].level]);
			sc__json_str(checks[i].detail);
			printf(", \"fix\": ");
			sc__json_str(checks[i].fix);
			printf("}");
		}
		printf("]}\n");
	} else {
		for (int i = 0; i < nchecks; i++)
			printf("%-4s  %-12s  %s%s%s\n", level_name[checks[i].level], checks[i].name,
			       checks[i].detail, checks[i].fix[0] ? "; fix: " : "", checks[i].fix);
		if (bad)
			printf("%d of %d checks not ok\n", bad, nchecks);
		else
			printf("all %d checks ok\n", nchecks);
	}
	return bad ? 1 : 0;
}
