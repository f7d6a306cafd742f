/* SPDX-License-Identifier: MIT */
/*
 * The exec family, posix_spawn, system and popen: connections the new
 * image would inherit switch back to TCP first.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "conn.h"
#include "link.h"
#include "listener.h"
#include "notify.h"
#include "ring.h"
#include "rundir.h"
#include "stats.h"
#include "txrx.h"
#include "interposer.h"
#include "rawsys.h"
/* ---- exec ------------------------------------------------------------------
 *
 * The new image cannot use our connections' state (even with the library:
 * its table starts empty), so every accelerated fd that survives the exec
 * (no FD_CLOEXEC) goes back to TCP first.  Only in the process that owns
 * them: a child of fork or vfork (whose pid we did not note) leaves its
 * parent's connections alone (README Limits).
 */

/* Every accelerated-or-pending socket of the table with its fd (the exec
 * path: the calling thread is about to replace the image). */
void fds_each(void (*fn)(int fd, struct sc_sock *s, bool vforked), bool vforked)
{
	for (int p = 0, end = tab_end_get(); p < NPAGES && (p << PAGE_BITS) < end; p++) {
		/* acquire: pairs with the release in sock_set (fdtable.c) */
		struct sc_sock *_Atomic *pg = atomic_load_explicit(&pages[p],
				memory_order_acquire);
		for (int i = 0; pg && i < tab_in_page(end, p); i++) {
			struct sc_sock *s = atomic_load_explicit(&pg[i], memory_order_acquire);
			if (s)
				fn((p << PAGE_BITS) | i, s, vforked);
		}
	}
}

static bool survives_exec(int fd)
{
	return !(R(fcntl)(fd, F_GETFD) & FD_CLOEXEC);
}

/* sockets still being set up that survive the exec: decided now */
static void exec_settle(int fd, struct sc_sock *s, bool vforked)
{
	int mode = sock_mode(s);
	if ((mode == M_SPENDING || mode == M_PENDING) && survives_exec(fd))
		settle_now(fd, s);
}

/* re-sends under way in threads that the exec ends: finish first */
static void exec_gate(int fd, struct sc_sock *s, bool vforked)
{
	/* seq_cst (kept; acquire would do): set by the switch (switch.c) */
	if (s->c && atomic_load_explicit(&s->resending, memory_order_seq_cst))
		tcp_gate(s);
}

/* the exec closes our FD_CLOEXEC connections without our close(): their
 * records go now (the stats file outlives the image) */
static void exec_records(int fd, struct sc_sock *s, bool vforked)
{
	if (s->rec && !survives_exec(fd)) {
		sc__rec_put(s->rec);
		s->rec = NULL;
	}
}

/* A child of vfork does not tell us what it dup'd where (Go's os/exec
 * puts ExtraFiles at 3, 4... with dup3 in its vfork child): the sockets
 * (device, inode) that will survive its exec under any number, read from
 * /proc/self/fd into a set on the stack.  Its table is its parent's,
 * keyed by the parent's numbers, which the child has too until the exec
 * closes them. */
#define KEPT_MAX 64
struct kept {
	int n;
	bool all;               /* more than KEPT_MAX, or unreadable: every one */
	dev_t dev[KEPT_MAX];
	ino_t ino[KEPT_MAX];
};
static __thread struct kept *vfork_kept;       /* during exec_prepare */

static void kept_read(struct kept *k)
{
	char buf[2048];
	long n;
	int dir = (int)SC_SYSCALL(SYS_openat, AT_FDCWD, "/proc/self/fd",
				  O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
	k->n = 0;
	k->all = dir < 0;
	while (dir >= 0 && (n = SC_SYSCALL(SYS_getdents64, dir, buf, sizeof(buf), 0, 0, 0)) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64 *d = (struct dirent64 *)(buf + off);
			off += d->d_reclen;
			struct stat st;
			int fd = atoi(d->d_name);
			if (d->d_name[0] == '.' || fd == dir || !survives_exec(fd) ||
			    fstat(fd, &st) || !S_ISSOCK(st.st_mode))
				continue;
			if (k->n == KEPT_MAX) {
				k->all = true;
				continue;
			}
			k->dev[k->n] = st.st_dev;
			k->ino[k->n++] = st.st_ino;
		}
	}
	if (dir >= 0)
		SC_SYSCALL(SYS_close, dir, 0, 0, 0, 0, 0);
}

/* fd (a number of the table) names a socket the vfork child's exec keeps */
static bool kept_has(const struct kept *k, int fd)
{
	struct stat st;
	if (k->all)
		return true;
	if (fstat(fd, &st))
		return false;
	for (int i = 0; i < k->n; i++)
		if (k->ino[i] == st.st_ino && k->dev[i] == st.st_dev)
			return true;
	return false;
}

/* inherited across fork (or, in a child of vfork, all of them: they are
 * our parent's): their owner switches them when asked; not for ever, as
 * the new image may never use them (and a stopped peer cannot answer) */
static void exec_inherited(int fd, struct sc_sock *s, bool vforked)
{
	if (sock_mode(s) != M_SHM || !(vforked || !sock_ours(s)))
		return;
	if (survives_exec(fd) || (vforked && vfork_kept && kept_has(vfork_kept, fd)))
		sw_request_owner_for(fd, s, SC_SWREQ_USE, 2000000000ull);
}

/* Before an exec (spawn false) or a spawn of a child that execs (spawn
 * true: posix_spawn, system, popen; we go on, with our FD_CLOEXEC
 * connections still ours). */
void exec_prepare(bool spawn)
{
	KEEP_ERRNO();
	bool vforked = sc__pid() != getpid();
	if (!vforked) {
		fds_each(exec_settle, false);
		sw_scan(true, false, true);     /* ours */
		fds_each(exec_gate, false);
		if (!spawn)
			fds_each(exec_records, false);
	}
	struct kept k;
	if (vforked) {
		kept_read(&k);
		vfork_kept = &k;
	}
	fds_each(exec_inherited, vforked);
	vfork_kept = NULL;
}

SC_API int execve(const char *path, char *const argv[], char *const envp[])
{
	exec_prepare(false);
	return R(execve)(path, argv, envp);
}

SC_API int execv(const char *path, char *const argv[])
{
	exec_prepare(false);
	return R(execv)(path, argv);
}

SC_API int execvp(const char *file, char *const argv[])
{
	exec_prepare(false);
	return R(execvp)(file, argv);
}

SC_API int execvpe(const char *file, char *const argv[], char *const envp[])
{
	exec_prepare(false);
	return R(execvpe)(file, argv, envp);
}

SC_API int fexecve(int fd, char *const argv[], char *const envp[])
{
	exec_prepare(false);
	return R(fexecve)(fd, argv, envp);
}

SC_API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		    int flags)
{
	exec_prepare(false);
	if (!real_execveat) {
		errno = ENOSYS;
		return -1;
	}
	return real_execveat(dirfd, path, argv, envp, flags);
}

/* posix_spawn: glibc's child execs without our execve, so the fds it
 * inherits switch here, as for an exec (file actions may close some: they
 * switch all the same) */
SC_API int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	exec_prepare(true);
	return R(posix_spawn)(pid, path, fa, attr, argv, envp);
}

SC_API int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	exec_prepare(true);
	return R(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

/* system() and popen(): glibc spawns the shell from inside them (its own
 * posix_spawn, not the symbol above), and the shell inherits every fd
 * without FD_CLOEXEC: those switch first, as for posix_spawn. */
SC_API int system(const char *cmd)
{
	if (cmd)
		exec_prepare(true);
	return R(system)(cmd);
}

SC_API FILE *popen(const char *cmd, const char *type)
{
	exec_prepare(true);
	return R(popen)(cmd, type);
}

/* execl, execlp, execle: arg and the list after it (up to its NULL, which
 * *ap is left past) as an argv of n + 1 entries; n from execl_count. */
static size_t execl_count(va_list ap)
{
	va_list c;
	size_t n = 1;
	va_copy(c, ap);
	while (va_arg(c, char *))
		n++;
	va_end(c);
	return n;
}

static void execl_fill(char **argv, const char *arg, size_t n, va_list *ap)
{
	argv[0] = (char *)arg;
	for (size_t i = 1; i < n; i++)
		argv[i] = va_arg(*ap, char *);
	argv[n] = NULL;
	(void)va_arg(*ap, char *);      /* the NULL */
}

SC_API int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	va_end(ap);
	return execv(path, argv);
}

SC_API int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	va_end(ap);
	return execvp(file, argv);
}

SC_API int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	size_t n = execl_count(ap);
	char **argv = alloca((n + 1) * sizeof(char *));
	execl_fill(argv, arg, n, &ap);
	char **envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, argv, envp);
}
