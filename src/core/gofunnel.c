/* SPDX-License-Identifier: MIT */
/*
 * Finding a Go program's system-call funnel in its ELF file (gofunnel.h).
 * Every offset read from the file is checked against its length: the file
 * is the program's, not ours.
 */
#include <elf.h>
#include <stdbool.h>
#include <string.h>

#include "gofunnel.h"

/* MOVQ SI,R10; MOVQ DI,DX; MOVQ CX,SI; MOVQ BX,DI; SYSCALL;
 * CMPQ AX,$0xfffffffffffff001 */
const unsigned char sc__go_prologue[SC_GO_PROLOGUE_LEN] = {
	0x49, 0x89, 0xf2, 0x48, 0x89, 0xfa, 0x48, 0x89, 0xce, 0x48,
	0x89, 0xdf, 0x0f, 0x05, 0x48, 0x3d, 0x01, 0xf0, 0xff, 0xff,
};

/* newest first */
static const char *const funnel_names[] = {
	"internal/runtime/syscall/linux.Syscall6",
	"internal/runtime/syscall.Syscall6",
	"runtime/internal/syscall.Syscall6",
};

#define GO_FUNC_ALIGN 32

struct image {
	const unsigned char *p;
	size_t len;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;   /* NULL: no section headers */
	const char *shstr;
	size_t shstr_len;
};

static bool in_image(const struct image *im, uint64_t off, uint64_t size)
{
	return off <= im->len && size <= im->len - off;
}

static const Elf64_Phdr *phdr(const struct image *im, unsigned i)
{
	return (const Elf64_Phdr *)(im->p + im->eh->e_phoff) + i;
}

static bool load_header(struct image *im)
{
	if (im->len < sizeof(Elf64_Ehdr) || memcmp(im->p, ELFMAG, SELFMAG) ||
	    im->p[EI_CLASS] != ELFCLASS64 || im->p[EI_DATA] != ELFDATA2LSB)
		return false;
	im->eh = (const Elf64_Ehdr *)im->p;
	const Elf64_Ehdr *eh = im->eh;
	if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_image(im, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)) ||
	    eh->e_phoff % 8)
		return false;
	if (eh->e_shnum && eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shoff % 8 == 0 &&
	    eh->e_shstrndx < eh->e_shnum &&
	    in_image(im, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
		const Elf64_Shdr *sh = (const Elf64_Shdr *)(im->p + eh->e_shoff);
		const Elf64_Shdr *ss = &sh[eh->e_shstrndx];
		if (ss->sh_type != SHT_NOBITS && in_image(im, ss->sh_offset, ss->sh_size)) {
			im->sh = sh;
			im->shstr = (const char *)im->p + ss->sh_offset;
			im->shstr_len = ss->sh_size;
		}
	}
	return true;
}

/* The section named name (with file contents), or NULL. */
static const Elf64_Shdr *section(const struct image *im, const char *name)
{
	if (!im->sh)
		return NULL;
	size_t n = strlen(name);
	for (unsigned i = 0; i < im->eh->e_shnum; i++) {
		const Elf64_Shdr *s = &im->sh[i];
		if (s->sh_name >= im->shstr_len || im->shstr_len - s->sh_name <= n ||
		    memcmp(im->shstr + s->sh_name, name, n + 1))
			continue;
		if (s->sh_type == SHT_NOBITS || !in_image(im, s->sh_offset, s->sh_size))
			return NULL;
		return s;
	}
	return NULL;
}

static bool has_interp(const struct image *im)
{
	for (unsigned i = 0; i < im->eh->e_phnum; i++)
		if (phdr(im, i)->p_type == PT_INTERP)
			return true;
	return false;
}

/* A symbol of the table sym (its strings in the section sh_link names)
 * called name: its value, or 0.  def: defined here (else: imported).  A
 * table off its entries' alignment is none, as headers are (load_header). */
static uint64_t symbol(const struct image *im, const Elf64_Shdr *sym, const char *name, bool def)
{
	if (!sym || sym->sh_link >= im->eh->e_shnum || sym->sh_entsize != sizeof(Elf64_Sym) ||
	    sym->sh_offset % _Alignof(Elf64_Sym))
		return 0;
	const Elf64_Shdr *st = &im->sh[sym->sh_link];
	if (st->sh_type == SHT_NOBITS || !in_image(im, st->sh_offset, st->sh_size))
		return 0;
	const char *str = (const char *)im->p + st->sh_offset;
	const Elf64_Sym *s = (const Elf64_Sym *)(im->p + sym->sh_offset);
	size_t n = strlen(name), count = sym->sh_size / sizeof(*s);
	for (size_t i = 0; i < count; i++) {
		if (s[i].st_name >= st->sh_size || st->sh_size - s[i].st_name <= n ||
		    memcmp(str + s[i].st_name, name, n + 1))
			continue;
		if (def && s[i].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s[i].st_info) == STT_FUNC)
			return s[i].st_value;
		if (!def && s[i].st_shndx == SHN_UNDEF)
			return 1;
	}
	return 0;
}

/* The file bytes at address vaddr, len of them in one PT_LOAD, or NULL. */
static const unsigned char *at_vaddr(const struct image *im, uint64_t vaddr, size_t len)
{
	for (unsigned i = 0; i < im->eh->e_phnum; i++) {
		const Elf64_Phdr *p = phdr(im, i);
		if (p->p_type != PT_LOAD || vaddr < p->p_vaddr || vaddr - p->p_vaddr > p->p_filesz ||
		    p->p_filesz - (vaddr - p->p_vaddr) < len)
			continue;
		uint64_t off = p->p_offset + (vaddr - p->p_vaddr);
		return in_image(im, off, len) ? im->p + off : NULL;
	}
	return NULL;
}

/* A stripped program: the prologue on Go's alignment in the executable
 * segments.  How many times it is there; the first in *vaddr. */
static unsigned scan_prologue(const struct image *im, uint64_t *vaddr)
{
	unsigned found = 0;
	for (unsigned i = 0; i < im->eh->e_phnum; i++) {
		const Elf64_Phdr *p = phdr(im, i);
		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X) ||
		    !in_image(im, p->p_offset, p->p_filesz))
			continue;
		uint64_t start = (GO_FUNC_ALIGN - p->p_vaddr % GO_FUNC_ALIGN) % GO_FUNC_ALIGN;
		for (uint64_t o = start; o + SC_GO_PROLOGUE_LEN <= p->p_filesz; o += GO_FUNC_ALIGN) {
			if (memcmp(im->p + p->p_offset + o, sc__go_prologue, SC_GO_PROLOGUE_LEN))
				continue;
			if (!found++)
				*vaddr = p->p_vaddr + o;
		}
	}
	return found;
}

/* The minor number of the Go that built the program, from the version
 * string its linker writes inline in .go.buildinfo (Go 1.18 and later:
 * a 32-byte header, flag 2, then a varint length and "go1.21.13"); -1 when
 * it is not there in that form (older layouts, "devel" builds, a cut
 * section). */
static int go_minor(const struct image *im)
{
	static const char magic[] = "\xff Go buildinf:";
	const Elf64_Shdr *b = section(im, ".go.buildinfo");
	if (!b || b->sh_size < 33)
		return -1;
	const unsigned char *p = im->p + b->sh_offset;
	size_t len = p[32];
	if (memcmp(p, magic, sizeof(magic) - 1) || !(p[15] & 2) || (len & 0x80) ||
	    len > b->sh_size - 33 || len < 5 || memcmp(p + 33, "go1.", 4))
		return -1;
	int minor = 0;
	size_t i = 4;
	for (; i < len && p[33 + i] >= '0' && p[33 + i] <= '9' && minor < 1000; i++)
		minor = minor * 10 + (p[33 + i] - '0');
	return i > 4 ? minor : -1;
}

static void locate(const struct image *im, struct sc_go_funnel *f)
{
	int minor = go_minor(im);
	if (minor >= 0 && minor < 21) {
		/* 1.19 and 1.20: the netpoller's epoll_create1, epoll_ctl and
		 * epoll_wait are assembly stubs of their own: routing the
		 * rest would leave its sleeps blind to shared memory */
		f->kind = SC_GO_NO_FUNNEL;
		f->why = "built with Go 1.20 or older, whose netpoller makes its epoll calls outside "
			 "the system-call funnel (Go 1.21 and later are accelerated)";
		return;
	}
	const Elf64_Shdr *symtab = section(im, ".symtab");
	for (size_t i = 0; symtab && i < sizeof(funnel_names) / sizeof(*funnel_names); i++) {
		uint64_t v = symbol(im, symtab, funnel_names[i], true);
		if (!v)
			continue;
		const unsigned char *b = at_vaddr(im, v, SC_GO_PROLOGUE_LEN);
		if (!b || memcmp(b, sc__go_prologue, SC_GO_PROLOGUE_LEN)) {
			f->kind = SC_GO_NO_FUNNEL;
			f->why = "its Syscall6 does not start as Go 1.19 to 1.27's does";
			return;
		}
		f->kind = SC_GO_OK;
		f->vaddr = v;
		f->found_by = funnel_names[i];
		return;
	}
	uint64_t v = 0;
	unsigned n = scan_prologue(im, &v);
	if (n == 1) {
		f->kind = SC_GO_OK;
		f->vaddr = v;
		f->found_by = "its first bytes (a stripped program)";
		return;
	}
	f->kind = SC_GO_NO_FUNNEL;
	f->why = n ? "the system-call funnel's first bytes are there more than once "
		     "(a stripped program: which one is Go's is not known)" :
		     "no system-call funnel of Go 1.19 or later (Go 1.18 and older had three)";
}

void sc__go_funnel(const unsigned char *img, size_t len, struct sc_go_funnel *f)
{
	struct image im = { .p = img, .len = len };
	memset(f, 0, sizeof(*f));
	f->kind = SC_GO_NOT_GO;
	f->why = "not a Go program";
	if (!load_header(&im) || !(section(&im, ".go.buildinfo") || section(&im, ".note.go.buildid")))
		return;
	if (im.eh->e_machine != EM_X86_64) {
		f->kind = SC_GO_ARCH;
		f->why = "a Go program for another machine than x86-64, where the funnel is not "
			 "patched";
		return;
	}
	if (!has_interp(&im) || !symbol(&im, section(&im, ".dynsym"), "pthread_create", false)) {
		f->kind = SC_GO_STATIC;
		f->why = "a Go program without cgo (built with CGO_ENABLED=0, or no package "
			 "using it): its threads are not the C library's, so ours cannot run on them";
		return;
	}
	locate(&im, f);
}
