/* SPDX-License-Identifier: MIT */
/*
 * Will the loader preload libshortcut into this program?  `shortcut run`
 * asks before it execs (and warns: the program still runs, on TCP), and
 * `shortcut doctor PROGRAM` reports the same.  Reasons it will not:
 *   - secure-execution mode (set-user-ID or set-group-ID to someone else,
 *     file capabilities): glibc's loader ignores LD_PRELOAD paths;
 *   - no loader at all (a static program), or another C library's loader;
 *   - another ELF class or machine than the library's;
 *   - a Go program that cannot be patched (src/core/gofunnel.h): static
 *     (no libc threads), for another machine, or older than Go 1.21.
 * A script (#!) is judged by its interpreter.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"
#include "gofunnel.h"

/* What the loader needs to know of an ELF file. */
struct elf_info {
	unsigned char cls, data;        /* ELFCLASS*, ELFDATA* */
	uint16_t machine;
	bool has_interp;
	char interp[PATH_MAX];
};

static void finding(struct sc_target *t, const char *fix, const char *fmt, ...)
{
	if (t->n >= SC_TARGET_FINDINGS)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->f[t->n].what, sizeof(t->f[t->n].what), fmt, ap);
	va_end(ap);
	snprintf(t->f[t->n].fix, sizeof(t->f[t->n].fix), "%s", fix);
	t->n++;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -ENOEXEC;
}

/* The fields below, from either class (host byte order only: a file of
 * the other order is for another machine, which the caller reports). */
struct hdr {
	uint64_t phoff, shoff;
	uint16_t phentsize, phnum, shentsize, shnum, shstrndx;
};

static int elf_header(int fd, struct elf_info *e, struct hdr *h)
{
	unsigned char id[EI_NIDENT];
	int rc = read_at(fd, id, sizeof(id), 0);
	if (rc)
		return rc;
	if (memcmp(id, ELFMAG, SELFMAG))
		return -ENOEXEC;
	e->cls = id[EI_CLASS];
	e->data = id[EI_DATA];
	if (e->cls == ELFCLASS64) {
		Elf64_Ehdr x;
		if ((rc = read_at(fd, &x, sizeof(x), 0)))
			return rc;
		e->machine = x.e_machine;
		*h = (struct hdr){ x.e_phoff, x.e_shoff, x.e_phentsize, x.e_phnum,
				   x.e_shentsize, x.e_shnum, x.e_shstrndx };
	} else if (e->cls == ELFCLASS32) {
		Elf32_Ehdr x;
		if ((rc = read_at(fd, &x, sizeof(x), 0)))
			return rc;
		e->machine = x.e_machine;
		*h = (struct hdr){ x.e_phoff, x.e_shoff, x.e_phentsize, x.e_phnum,
				   x.e_shentsize, x.e_shnum, x.e_shstrndx };
	} else {
		return -ENOEXEC;
	}
	return 0;
}

/* Program header i's type, file offset and size. */
static int phdr(int fd, bool w64, const struct hdr *h, unsigned i, uint32_t *type,
		uint64_t *off, uint64_t *size)
{
	uint64_t at = h->phoff + (uint64_t)i * h->phentsize;
	int rc;
	if (w64) {
		Elf64_Phdr p;
		if ((rc = read_at(fd, &p, sizeof(p), at)))
			return rc;
		*type = p.p_type, *off = p.p_offset, *size = p.p_filesz;
	} else {
		Elf32_Phdr p;
		if ((rc = read_at(fd, &p, sizeof(p), at)))
			return rc;
		*type = p.p_type, *off = p.p_offset, *size = p.p_filesz;
	}
	return 0;
}

/* PT_INTERP, and whether a section says Go.  0, or -errno / -ENOEXEC. */
static int elf_read(const char *path, struct elf_info *e)
{
	struct hdr h;
	uint32_t type;
	uint64_t off, size;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(e, 0, sizeof(*e));
	int rc = elf_header(fd, e, &h);
	bool w64 = e->cls == ELFCLASS64;
	if (rc)
		goto out;
	for (unsigned i = 0; i < h.phnum && i < 256; i++) {
		if (phdr(fd, w64, &h, i, &type, &off, &size))
			break;
		if (type == PT_INTERP && size > 1 && size < sizeof(e->interp) &&
		    read_at(fd, e->interp, size, off) == 0) {
			e->interp[size - 1] = 0;
			e->has_interp = true;
		}
	}
out:
	close(fd);
	return rc;
}

/* What the interposer will find of a Go program (the same function reads
 * the same file): kind SC_GO_NOT_GO if path cannot be read. */
static void go_read(const char *path, struct sc_go_funnel *g)
{
	struct stat st;
	void *p = MAP_FAILED;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		sc__go_funnel(NULL, 0, g);
		return;
	}
	sc__go_funnel(p, (size_t)st.st_size, g);
	munmap(p, (size_t)st.st_size);
}

/* A Go program's findings: none where its funnel will be patched. */
static void go_findings(const struct sc_go_funnel *g, struct sc_target *t)
{
	const char *go = getenv("SHORTCUT_GO");
	if (g->kind == SC_GO_OK && go && !strcmp(go, "0"))
		finding(t, "unset SHORTCUT_GO (or set it to 1) to accelerate it",
			"a Go program, and SHORTCUT_GO=0: its connections stay on TCP");
	else if (g->kind == SC_GO_STATIC)
		finding(t, "build it with cgo to accelerate it: CGO_ENABLED=1 and a package that "
			"uses it (net's resolver: -tags netcgo), or -ldflags=-linkmode=external "
			"(docs/go.md)", "%s, so its connections stay on TCP", g->why);
	else if (g->kind == SC_GO_OK)
		snprintf(t->note, sizeof(t->note), "; a Go program, whose system-call funnel "
			 "(found by %s) will be patched to come through it", g->found_by);
	else
		finding(t, "none: it runs as it is, and its peers talk TCP with it (fallback "
			"peer_not_accelerated)", "a Go program: %s, so its connections stay on TCP",
			g->why);
}

/* prog as execvp finds it: with a slash as it is, else along PATH. */
static int resolve(const char *prog, char *out, size_t len)
{
	if (strchr(prog, '/')) {
		if (snprintf(out, len, "%s", prog) >= (int)len)
			return -ENAMETOOLONG;
		return access(out, X_OK) ? -errno : 0;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/bin:/usr/bin";         /* execvp's default */
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		struct stat st;
		int n = end == p ? snprintf(out, len, "%s", prog) :
			snprintf(out, len, "%.*s/%s", (int)(end - p), p, prog);
		if (n > 0 && n < (int)len && access(out, X_OK) == 0 && stat(out, &st) == 0 &&
		    S_ISREG(st.st_mode))
			return 0;
		if (!*end)
			return -ENOENT;
		p = end;
	}
}

/* Will the kernel run it in secure-execution mode (AT_SECURE), where the
 * loader ignores LD_PRELOAD's paths? */
static void secure_exec(const char *path, const struct stat *st, struct sc_target *t)
{
	struct statvfs vfs;
	if (statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_NOSUID))
		return;                 /* the bits do nothing on this mount */
	static const char fix[] = "run it as its owner, or without the bit, to accelerate it";
	if ((st->st_mode & S_ISUID) && st->st_uid != getuid())
		finding(t, fix, "set-user-ID (owner uid %u): the loader runs it in secure mode and "
			"ignores LD_PRELOAD; its connections stay on TCP", (unsigned)st->st_uid);
	else if ((st->st_mode & S_ISGID) && (st->st_mode & S_IXGRP) && st->st_gid != getgid())
		finding(t, fix, "set-group-ID (group %u): the loader runs it in secure mode and "
			"ignores LD_PRELOAD; its connections stay on TCP", (unsigned)st->st_gid);
	else if (getuid() != 0 && getxattr(path, "security.capability", NULL, 0) > 0)
		finding(t, "run it as root, or without file capabilities, to accelerate it",
			"has file capabilities: the loader runs it in secure mode and ignores "
			"LD_PRELOAD; its connections stay on TCP");
}

static const char *base(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int check(const char *prog, struct sc_target *t, int depth)
{
	char path[PATH_MAX];
	int rc = resolve(prog, path, sizeof(path));
	if (rc)
		return rc;
	if (!depth)
		snprintf(t->path, sizeof(t->path), "%s", path);
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	/* a script: the kernel runs its interpreter (env's program, with env) */
	char line[256] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n > 2 && line[0] == '#' && line[1] == '!') {
		line[strcspn(line, "\n")] = 0;
		char *save, *interp = strtok_r(line + 2, " \t", &save);
		if (interp && !strcmp(base(interp), "env"))
			while ((interp = strtok_r(NULL, " \t", &save)) && interp[0] == '-')
				;
		if (!interp || depth >= 4)
			return 0;
		int before = t->n;
		check(interp, t, depth + 1);
		for (int k = before; k < t->n; k++) {
			char w[sizeof(t->f[k].what)];
			snprintf(w, sizeof(w), "its interpreter %s: %s", interp, t->f[k].what);
			memcpy(t->f[k].what, w, sizeof(w));
		}
		return 0;
	}
	struct elf_info e, self;
	if (elf_read(path, &e))
		return 0;               /* not ELF: exec decides (binfmt_misc...) */
	if (elf_read("/proc/self/exe", &self))
		memset(&self, 0, sizeof(self));
	struct sc_go_funnel g;
	go_read(path, &g);
	if (g.kind != SC_GO_NOT_GO)
		go_findings(&g, t);
	else if (!e.has_interp)
		finding(t, "link it dynamically (against glibc) to accelerate it",
			"statically linked: no loader runs, so nothing is preloaded and its "
			"connections stay on TCP");
	else if (self.cls && (e.cls != self.cls || e.data != self.data || e.machine != self.machine))
		finding(t, "run a build of it for this machine's ABI to accelerate it",
			"built for another ABI (%d-bit, machine %u) than the library (%d-bit, "
			"machine %u): the loader skips libshortcut and its connections stay on TCP",
			e.cls == ELFCLASS64 ? 64 : 32, e.machine, self.cls == ELFCLASS64 ? 64 : 32,
			self.machine);
	else if (self.has_interp && strcmp(base(e.interp), base(self.interp)))
		finding(t, "build it against glibc to accelerate it",
			"its loader is %s, not glibc's %s (another C library): libshortcut cannot "
			"be preloaded and its connections stay on TCP", e.interp, self.interp);
	secure_exec(path, &st, t);
	return 0;
}

int sc__target_check(const char *prog, struct sc_target *t)
{
	memset(t, 0, sizeof(*t));
	return check(prog, t, 0);
}
