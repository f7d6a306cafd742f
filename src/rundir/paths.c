/* SPDX-License-Identifier: MIT */
/*
 * The run directory (SHORTCUT_RUNDIR) and the names in it: its path,
 * made private on first use; addresses; processes' liveness; rendezvous
 * socket names.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "rundir.h"
#include "stats.h"
#include "sys.h"

static pthread_once_t dir_once = PTHREAD_ONCE_INIT;
static char dir[256];
static bool dir_ok;
static char dir_err[1024];
static uint64_t netns_ino;

/* Which setting chose the run directory, for messages: the one to change. */
static const char *dir_setting(void)
{
	const char *e = getenv("SHORTCUT_RUNDIR");
	const char *x = getenv("XDG_RUNTIME_DIR");

	if (e && *e)
		return "SHORTCUT_RUNDIR";
	if (sc__cfg.group_set)
		return "the default for SHORTCUT_GROUP, /dev/shm/shortcut-gGID: SHORTCUT_RUNDIR is not set";
	if (x && *x)
		return "the default, $XDG_RUNTIME_DIR/shortcut: SHORTCUT_RUNDIR is not set";
	return "the default: SHORTCUT_RUNDIR and XDG_RUNTIME_DIR are not set";
}

/* Is the run directory (st) one whose files we may trust: ours, that no
 * other user may write; or, with SHORTCUT_GROUP, the group's, that no
 * user outside it may write.  NULL, or why not (into what). */
static const char *dir_untrusted(const struct stat *st, char *what, size_t len)
{
	bool grp = sc__cfg.group_set && st->st_gid == sc__cfg.group_gid;
	if (S_ISLNK(st->st_mode))
		return "a symbolic link, not a directory";
	if (!S_ISDIR(st->st_mode))
		return "not a directory";
	if (st->st_uid != geteuid() && !grp) {
		if (sc__cfg.group_set)
			snprintf(what, len, "owned by uid %u and group %u, neither this user (uid %u) "
				 "nor SHORTCUT_GROUP (gid %u)", (unsigned)st->st_uid,
				 (unsigned)st->st_gid, (unsigned)geteuid(), (unsigned)sc__cfg.group_gid);
		else
			snprintf(what, len, "owned by uid %u, not by this user (uid %u)",
				 (unsigned)st->st_uid, (unsigned)geteuid());
		return what;
	}
	if ((st->st_mode & S_IWOTH) || ((st->st_mode & S_IWGRP) && !grp)) {
		snprintf(what, len, "mode %03o: other users may write in it%s",
			 (unsigned)(st->st_mode & 07777),
			 grp ? "" : " (a directory shared by a group needs SHORTCUT_GROUP)");
		return what;
	}
	return NULL;
}

/* Create the run directory, or check the one there: a directory (not a
 * symlink) of this user's, that no other user may write (or, with
 * SHORTCUT_GROUP, the group's, mode 2770).  Another user's directory, or
 * one others may write, would let them impersonate listeners, read our
 * offers, or switch us off. */
static int mkdir_private(const char *p)
{
	struct stat st;
	int saved = errno;
	char what[160];
	mode_t mode = sc__cfg.group_set ? 02770 : 0700;

	int made = mkdir(p, mode);
	if (made == 0 && sc__cfg.group_set) {
		/* ours: the group's, its mode whatever the umask took */
		if (chown(p, (uid_t)-1, (gid_t)sc__cfg.group_gid) < 0 || chmod(p, mode) < 0) {
			snprintf(dir_err, sizeof(dir_err), "%s (%s): cannot give it to group %u "
				 "(SHORTCUT_GROUP): %s", p, dir_setting(),
				 (unsigned)sc__cfg.group_gid, strerror(errno));
			errno = saved;
			return -1;
		}
	} else if (made < 0 && errno != EEXIST) {
		snprintf(dir_err, sizeof(dir_err), "%s (%s): cannot create it (%s); set "
			 "SHORTCUT_RUNDIR to a directory this user may create", p, dir_setting(),
			 strerror(errno));
		errno = saved;
		return -1;
	}
	if (lstat(p, &st) < 0) {
		snprintf(dir_err, sizeof(dir_err), "%s (%s): %s", p, dir_setting(), strerror(errno));
		errno = saved;
		return -1;
	}
	const char *why = dir_untrusted(&st, what, sizeof(what));
	errno = saved;
	if (!why)
		return 0;
	snprintf(dir_err, sizeof(dir_err), "%s (%s): %s; remove it, or set SHORTCUT_RUNDIR to "
		 "a directory of this user's that only it may write (the same on both sides)%s",
		 p, dir_setting(), why,
		 sc__cfg.group_set ? ", or one of SHORTCUT_GROUP's, mode 2770" : "");
	return -1;
}

bool sc__rundir_file_ok(const struct stat *st)
{
	if (st->st_uid == geteuid())
		return true;
	/* another member's file, in the group's directory, that nobody
	 * outside the group may write */
	return sc__cfg.group_set && st->st_gid == sc__cfg.group_gid && !(st->st_mode & S_IWOTH);
}

mode_t sc__rundir_file_mode(void)
{
	return sc__cfg.group_set ? 0660 : 0600;
}

void sc__rundir_file_made(int fd)
{
	/* the group may write it whatever our umask took away */
	if (sc__cfg.group_set)
		(void)fchmod(fd, 0660);
}

static bool on_tmpfs(const char *path)
{
	struct statfs fs;
	return statfs(path, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

int sc__rundir_choose(char *buf, size_t len)
{
	(void)sc__config_load();        /* SHORTCUT_GROUP chooses too */
	const char *e = getenv("SHORTCUT_RUNDIR");
	const char *x = getenv("XDG_RUNTIME_DIR");
	int n;

	if (e && *e)
		n = snprintf(buf, len, "%s", e);
	else if (sc__cfg.group_set)
		/* one directory for the group's users (each has its own
		 * $XDG_RUNTIME_DIR) */
		n = snprintf(buf, len, "%s/shortcut-g%u",
			     on_tmpfs("/dev/shm") ? "/dev/shm" : "/tmp", (unsigned)sc__cfg.group_gid);
	else if (x && *x)
		n = snprintf(buf, len, "%s/shortcut", x);
	else
		/* in memory where there is a tmpfs for it: a process creates
		 * files here (its stats file, its rendezvous socket), and on a
		 * disk file system each cost a fork-per-connection server a
		 * millisecond of journal work per connection */
		n = snprintf(buf, len, "%s/shortcut-%u",
			     on_tmpfs("/dev/shm") ? "/dev/shm" : "/tmp", (unsigned)geteuid());
	/* room for "/p-IDENT.sock" (22 bytes) inside sun_path (108 bytes) */
	return n <= 0 || n >= SC_RUNDIR_MAX ? -ENAMETOOLONG : 0;
}

static void dir_init(void)
{
	struct stat st;

	if (sc__rundir_choose(dir, sizeof(dir)))
		snprintf(dir_err, sizeof(dir_err), "%.100s...: longer than 79 bytes (a Unix "
			 "socket name must fit); set SHORTCUT_RUNDIR to a shorter path", dir);
	else
		dir_ok = mkdir_private(dir) == 0;
	if (stat("/proc/self/ns/net", &st) == 0)
		netns_ino = st.st_ino;
}

const char *sc__rundir(void)
{
	pthread_once(&dir_once, dir_init);
	return dir_ok ? dir : NULL;
}

const char *sc__rundir_error(void)
{
	pthread_once(&dir_once, dir_init);
	return dir_ok ? "" : dir_err;
}

uint64_t sc__netns(void)
{
	pthread_once(&dir_once, dir_init);
	return netns_ino;
}

/* ---- addresses ---------------------------------------------------------- */

bool sc__addr16(const struct sockaddr *sa, struct sc_addr16 *out, uint16_t *port)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		out->b[10] = out->b[11] = 0xff;
		memcpy(&out->b[12], &s4->sin_addr, 4);
		if (port)
			*port = ntohs(s4->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		memcpy(out->b, &s6->sin6_addr, 16);
		if (port)
			*port = ntohs(s6->sin6_port);
		return true;
	}
	return false;
}

static bool is_v4(const struct sc_addr16 *a)
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };
	return !memcmp(a->b, pre, 12);
}

bool sc__addr_is_loopback(const struct sc_addr16 *a)
{
	static const uint8_t one[16] = { [15] = 1 };
	if (is_v4(a))
		return a->b[12] == 127;
	return !memcmp(a->b, one, 16);
}

bool sc__addr_is_any(const struct sc_addr16 *a)
{
	static const uint8_t zero[16];
	if (is_v4(a))
		return !memcmp(&a->b[12], zero, 4);
	return !memcmp(a->b, zero, 16);
}

bool sc__pid_exists(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

bool sc__pid_alive(int32_t pid)
{
	if (!sc__pid_exists(pid))
		return false;
	/* a zombie answers kill(0) but will never do anything again */
	char path[64], st[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return true;
	st[n] = 0;
	const char *p = strrchr(st, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

int sc__backed(void *p, size_t len)
{
	uintptr_t pg = (uintptr_t)getpagesize(), a = (uintptr_t)p & ~(pg - 1);
	int saved = errno, rc = 0;

	/* the pages allocated now, or an error instead of the SIGBUS a store
	 * to a hole of a full tmpfs would raise; EINVAL: a kernel before 5.14
	 * cannot say, and the pages are touched as before */
	if (madvise((void *)a, (uintptr_t)p + len - a, MADV_POPULATE_WRITE) < 0 && errno != EINVAL)
		rc = -ENOSPC;
	errno = saved;
	return rc;
}

int sc__rendezvous_path(uint64_t id, char *buf, size_t len)
{
	const char *d = sc__rundir();
	if (!d)
		return -ENOENT;
	if (!id)
		return -ENOSPC;         /* no identity: nobody could find us */
	int n = snprintf(buf, len, "%s/p-%014llx.sock", d, (unsigned long long)id);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}
