/* SPDX-License-Identifier: MIT */
/*
 * Finding a Go program's system-call funnel (src/core/gofunnel.c) in ELF
 * images built here, in memory, to order: an ELF header, program headers
 * (PT_PHDR, PT_INTERP, an R+X PT_LOAD holding a text blob, an optional R
 * PT_LOAD of data), and sections (.text, .interp, .go.buildinfo, .dynsym
 * and .dynstr importing pthread_create, .symtab and .strtab defining the
 * funnel's symbol, .shstrtab), each left out or changed as a scenario
 * needs.  Every outcome (NOT_GO, STATIC, ARCH, NO_FUNNEL, OK by each symbol
 * name and by the first bytes) and files that lie (offsets past the end,
 * truncated, garbage).  Each image is an allocation of its exact size, so
 * that ASan sees a read past its end.  No external tools, no randomness
 * but a fixed seed: the same answers on every run.
 *
 * SC_GOFUNNEL_SEEDS=DIR build/t/test_gofunnel writes the images of the
 * scenarios marked below into DIR (how tests/fuzz/corpus/gofunnel/ was made).
 */
#include <elf.h>
#include <stdbool.h>
#include <string.h>

#include "gofunnel.h"
#include "t_util.h"

#define BASE_VADDR  0x400000u
#define TEXT_OFF    0x400u          /* the text's file offset */
#define TEXT_VADDR  (BASE_VADDR + 0x1000u + TEXT_OFF)   /* 32-byte aligned */
#define TEXT_LEN    512u
#define DATA_LEN    128u
#define MAX_PHDRS   4u
#define INTERP      "/lib64/ld-linux-x86-64.so.2"

static const char *const names[] = {
	"internal/runtime/syscall/linux.Syscall6",
	"internal/runtime/syscall.Syscall6",
	"runtime/internal/syscall.Syscall6",
};

/* What to build. */
struct spec {
	uint16_t machine;       /* 0: EM_X86_64 */
	bool no_interp;         /* no PT_INTERP (a static program) */
	bool no_dynsym;         /* no .dynsym at all */
	bool no_pthread;        /* .dynsym without pthread_create */
	bool pthread_defined;   /* pthread_create defined in .dynsym, not imported */
	const char *go_sec;     /* the Go section's name; NULL: .go.buildinfo; "": none */
	const char *version;    /* the version .go.buildinfo names ("go1.21.13"); NULL: none */
	const char *sym;        /* the funnel's symbol in .symtab; NULL: stripped */
	uint32_t sym_at;        /* its offset in the text */
	unsigned char sym_type; /* 0: STT_FUNC */
	bool symtab_misaligned; /* .symtab at an offset 4 past an 8-aligned one */
	bool data_load;         /* a second PT_LOAD, R only, holding data[] */
	unsigned char text[TEXT_LEN];
	unsigned char data[DATA_LEN];
};

struct img {
	unsigned char *p;       /* malloc'ed, len bytes exactly */
	size_t len;
};

/* ---- the builder ------------------------------------------------------ */

static unsigned char buf[16384];
static size_t pos;

static size_t put(const void *src, size_t n, size_t align)
{
	pos = (pos + align - 1) / align * align;
	T_ASSERT(pos + n <= sizeof(buf));
	memcpy(buf + pos, src, n);
	pos += n;
	return pos - n;
}

struct sections {
	Elf64_Shdr sh[16];
	unsigned n;
	char str[256];          /* .shstrtab */
	size_t str_len;
};

static unsigned add_section(struct sections *s, const char *name, uint32_t type, uint64_t flags,
			    uint64_t off, uint64_t size)
{
	T_ASSERT(s->n < 16 && s->str_len + strlen(name) + 1 <= sizeof(s->str));
	Elf64_Shdr *h = &s->sh[s->n];
	memset(h, 0, sizeof(*h));
	h->sh_name = (uint32_t)s->str_len;
	h->sh_type = type;
	h->sh_flags = flags;
	h->sh_offset = off;
	h->sh_size = size;
	h->sh_addralign = 1;
	memcpy(s->str + s->str_len, name, strlen(name) + 1);
	s->str_len += strlen(name) + 1;
	return s->n++;
}

static Elf64_Sym sym(uint32_t name, unsigned char type, uint16_t shndx, uint64_t value)
{
	Elf64_Sym y = { .st_name = name, .st_info = ELF64_ST_INFO(STB_GLOBAL, type),
			.st_shndx = shndx, .st_value = value, .st_size = value ? 64 : 0 };
	return y;
}

/* .dynstr and .dynsym: imports (pthread_create, or malloc in its place) */
static void add_dynsym(struct sections *s, const struct spec *sp)
{
	static const char dstr[] = "\0pthread_create\0malloc\0write";
	size_t so = put(dstr, sizeof(dstr), 1);
	unsigned dstr_i = add_section(s, ".dynstr", SHT_STRTAB, SHF_ALLOC, so, sizeof(dstr));
	Elf64_Sym dy[3] = { { 0 } };
	dy[1] = sym(sp->no_pthread ? 16 : 1, STT_FUNC, SHN_UNDEF, 0);
	if (sp->pthread_defined)
		dy[1] = sym(1, STT_FUNC, 1, TEXT_VADDR + 0x100);
	dy[2] = sym(23, STT_FUNC, SHN_UNDEF, 0);
	size_t yo = put(dy, sizeof(dy), 8);
	unsigned i = add_section(s, ".dynsym", SHT_DYNSYM, SHF_ALLOC, yo, sizeof(dy));
	s->sh[i].sh_link = dstr_i;
	s->sh[i].sh_entsize = sizeof(Elf64_Sym);
}

/* .strtab and .symtab: runtime.main at the text's start, the funnel's
 * symbol at sym_at, an import of pthread_create */
static void add_symtab(struct sections *s, const struct spec *sp)
{
	char str[128] = "\0runtime.main";       /* 1 */
	size_t n = 14, fn = n;
	T_ASSERT(strlen(sp->sym) + 1 + 16 <= sizeof(str) - n);
	memcpy(str + n, sp->sym, strlen(sp->sym) + 1);
	n += strlen(sp->sym) + 1;
	size_t pt = n;
	memcpy(str + n, "pthread_create", 15);
	n += 15;
	size_t so = put(str, n, 1);
	unsigned str_i = add_section(s, ".strtab", SHT_STRTAB, 0, so, n);
	Elf64_Sym y[4] = { { 0 } };
	y[1] = sym(1, STT_FUNC, 1, TEXT_VADDR);
	y[2] = sym((uint32_t)fn, sp->sym_type ? sp->sym_type : STT_FUNC, 1, TEXT_VADDR + sp->sym_at);
	y[3] = sym((uint32_t)pt, STT_FUNC, SHN_UNDEF, 0);
	if (sp->symtab_misaligned)
		pos = (pos + 7) / 8 * 8 + 4;
	size_t yo = put(y, sizeof(y), sp->symtab_misaligned ? 1 : 8);
	unsigned i = add_section(s, ".symtab", SHT_SYMTAB, 0, yo, sizeof(y));
	s->sh[i].sh_link = str_i;
	s->sh[i].sh_entsize = sizeof(Elf64_Sym);
}

static Elf64_Phdr ph(uint32_t type, uint32_t flags, uint64_t off, uint64_t vaddr, uint64_t size)
{
	Elf64_Phdr p = { .p_type = type, .p_flags = flags, .p_offset = off, .p_vaddr = vaddr,
			 .p_paddr = vaddr, .p_filesz = size, .p_memsz = size, .p_align = 8 };
	return p;
}

static struct img build(const struct spec *sp)
{
	struct sections s = { .n = 0 };
	Elf64_Phdr phs[MAX_PHDRS];
	unsigned nph = 0;

	memset(buf, 0, sizeof(buf));
	pos = sizeof(Elf64_Ehdr) + MAX_PHDRS * sizeof(Elf64_Phdr);
	add_section(&s, "", SHT_NULL, 0, 0, 0);
	phs[nph++] = ph(PT_PHDR, PF_R, sizeof(Elf64_Ehdr), BASE_VADDR + sizeof(Elf64_Ehdr),
			MAX_PHDRS * sizeof(Elf64_Phdr));
	pos = TEXT_OFF;
	put(sp->text, TEXT_LEN, 1);
	T_EQ(add_section(&s, ".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, TEXT_OFF, TEXT_LEN),
	     1);
	s.sh[1].sh_addr = TEXT_VADDR;
	s.sh[1].sh_addralign = 32;
	size_t io = put(INTERP, sizeof(INTERP), 1);
	add_section(&s, ".interp", SHT_PROGBITS, SHF_ALLOC, io, sizeof(INTERP));
	if (!sp->no_interp)
		phs[nph++] = ph(PT_INTERP, PF_R, io, BASE_VADDR + io, sizeof(INTERP));
	phs[nph++] = ph(PT_LOAD, PF_R | PF_X, TEXT_OFF, TEXT_VADDR, TEXT_LEN);
	if (sp->data_load) {
		size_t d = put(sp->data, DATA_LEN, 32);
		phs[nph++] = ph(PT_LOAD, PF_R, d, BASE_VADDR + 0x2000 + d, DATA_LEN);
		add_section(&s, ".rodata", SHT_PROGBITS, SHF_ALLOC, d, DATA_LEN);
	}
	if (!sp->go_sec || *sp->go_sec) {
		unsigned char info[64] = "\xff Go buildinf:\x08\x02";
		size_t n = 32, vl = sp->version ? strlen(sp->version) : 0;
		if (vl) {
			T_ASSERT(vl < sizeof(info) - 33);
			info[32] = (unsigned char)vl;
			memcpy(info + 33, sp->version, vl);
			n = 33 + vl;
		}
		size_t g = put(info, n, 16);
		add_section(&s, sp->go_sec ? sp->go_sec : ".go.buildinfo", SHT_PROGBITS,
			    SHF_ALLOC | SHF_WRITE, g, n);
	}
	if (!sp->no_dynsym)
		add_dynsym(&s, sp);
	if (sp->sym)
		add_symtab(&s, sp);
	unsigned shstr_i = add_section(&s, ".shstrtab", SHT_STRTAB, 0, 0, 0);
	s.sh[shstr_i].sh_size = s.str_len;
	s.sh[shstr_i].sh_offset = put(s.str, s.str_len, 1);
	size_t sho = put(s.sh, s.n * sizeof(Elf64_Shdr), 8);

	Elf64_Ehdr eh = { .e_type = ET_EXEC, .e_machine = sp->machine ? sp->machine : EM_X86_64,
			  .e_version = EV_CURRENT, .e_entry = TEXT_VADDR,
			  .e_phoff = sizeof(Elf64_Ehdr), .e_shoff = sho,
			  .e_ehsize = sizeof(Elf64_Ehdr), .e_phentsize = sizeof(Elf64_Phdr),
			  .e_phnum = (uint16_t)nph, .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = (uint16_t)s.n, .e_shstrndx = (uint16_t)shstr_i };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + sizeof(eh), phs, nph * sizeof(Elf64_Phdr));

	struct img im = { .p = malloc(pos), .len = pos };
	T_ASSERT(im.p);
	memcpy(im.p, buf, pos);
	return im;
}

/* text filler: int3, as between Go's functions (never the prologue) */
static void spec_init(struct spec *sp)
{
	memset(sp, 0, sizeof(*sp));
	memset(sp->text, 0xcc, sizeof(sp->text));
	memset(sp->data, 0, sizeof(sp->data));
}

static void prologue_at(unsigned char *where)
{
	memcpy(where, sc__go_prologue, SC_GO_PROLOGUE_LEN);
	where[SC_GO_PROLOGUE_LEN] = 0x76;       /* JLS, as Syscall6 goes on */
}

/* A Go program with cgo, stripped, its funnel at text offset at. */
static void spec_go(struct spec *sp, uint32_t at)
{
	spec_init(sp);
	prologue_at(sp->text + at);
}

/* The same with .symtab naming the funnel there. */
static void spec_go_sym(struct spec *sp, const char *name, uint32_t at)
{
	spec_go(sp, at);
	sp->sym = name;
	sp->sym_at = at;
}

/* ---- looking at an image ---------------------------------------------- */

static Elf64_Ehdr *ehdr(struct img *im)
{
	return (Elf64_Ehdr *)im->p;
}

/* The section header named name in an image as built. */
static Elf64_Shdr *shdr(struct img *im, const char *name)
{
	Elf64_Ehdr *eh = ehdr(im);
	Elf64_Shdr *sh = (Elf64_Shdr *)(im->p + eh->e_shoff);
	const char *str = (const char *)im->p + sh[eh->e_shstrndx].sh_offset;
	for (unsigned i = 0; i < eh->e_shnum; i++)
		if (!strcmp(str + sh[i].sh_name, name))
			return &sh[i];
	T_FAIL("no section %s", name);
}

static Elf64_Phdr *phdr_of(struct img *im, uint32_t type)
{
	Elf64_Phdr *p = (Elf64_Phdr *)(im->p + ehdr(im)->e_phoff);
	for (unsigned i = 0; i < ehdr(im)->e_phnum; i++)
		if (p[i].p_type == type)
			return &p[i];
	T_FAIL("no program header of type %u", type);
}

static const char *kind_name(enum sc_go_kind k)
{
	static const char *const n[] = { "NOT_GO", "STATIC", "ARCH", "NO_FUNNEL", "OK" };
	return (unsigned)k < 5 ? n[k] : "(out of range)";
}

/* sc__go_funnel on img[0, len), and what every answer keeps. */
static struct sc_go_funnel funnel(const unsigned char *img, size_t len)
{
	struct sc_go_funnel f;
	memset(&f, 0x5a, sizeof(f));
	sc__go_funnel(img, len, &f);
	T_ASSERTF(f.kind >= SC_GO_NOT_GO && f.kind <= SC_GO_OK, "kind %d", (int)f.kind);
	if (f.kind == SC_GO_OK) {
		T_ASSERT(f.found_by && *f.found_by);
	} else {
		T_ASSERT(f.why && *f.why);
		T_ASSERT(!f.found_by);
		T_EQ(f.vaddr, 0);
	}
	return f;
}

/* The answer for im, which must be want (an OK's vaddr and found_by
 * checked by the caller); im freed. */
static struct sc_go_funnel expect(struct img *im, enum sc_go_kind want)
{
	struct sc_go_funnel f = funnel(im->p, im->len);
	T_ASSERTF(f.kind == want, "%s, not %s (%s)", kind_name(f.kind), kind_name(want),
		  f.kind == SC_GO_OK ? f.found_by : f.why);
	free(im->p);
	im->p = NULL;
	return f;
}

/* An OK by symbol name at text offset at. */
static void expect_ok(struct img *im, const char *by, uint32_t at)
{
	struct sc_go_funnel f = expect(im, SC_GO_OK);
	T_EQ(f.vaddr, TEXT_VADDR + at);
	T_ASSERTF(!strcmp(f.found_by, by), "found by %s, not %s", f.found_by, by);
}

static void expect_ok_stripped(struct img *im, uint32_t at)
{
	struct sc_go_funnel f = expect(im, SC_GO_OK);
	T_EQ(f.vaddr, TEXT_VADDR + at);
	T_ASSERTF(!strncmp(f.found_by, "its first bytes", 15), "found by %s", f.found_by);
}

static void expect_why(struct img *im, enum sc_go_kind want, const char *words)
{
	struct sc_go_funnel f = expect(im, want);
	T_ASSERTF(strstr(f.why, words), "why: %s (wanted: ...%s...)", f.why, words);
}

/* SC_GOFUNNEL_SEEDS=DIR: the image into DIR/name (a fuzzing seed). */
static void seed(const struct img *im, const char *name)
{
	const char *dir = getenv("SC_GOFUNNEL_SEEDS");
	if (!dir || !*dir)
		return;
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	T_ASSERTF(f, "%s", path);
	T_EQ(fwrite(im->p, 1, im->len, f), im->len);
	T_EQ(fclose(f), 0);
}

/* ---- not Go ----------------------------------------------------------- */

/* everything a cgo Go program has but its Go section */
T_TEST(not_go)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	sp.go_sec = "";
	struct img im = build(&sp);
	seed(&im, "not_go");
	expect_why(&im, SC_GO_NOT_GO, "not a Go program");
	/* a section whose name only starts as Go's */
	sp.go_sec = ".go.buildinfox";
	im = build(&sp);
	expect(&im, SC_GO_NOT_GO);
	sp.go_sec = ".go.buildin";
	im = build(&sp);
	expect(&im, SC_GO_NOT_GO);
	/* the build-id note is Go's mark too */
	sp.go_sec = ".note.go.buildid";
	im = build(&sp);
	expect_ok(&im, names[0], 64);
}

T_TEST(not_elf)
{
	static const unsigned char shebang[] = "#!/bin/sh\nexec go run .\n";
	funnel(NULL, 0);
	T_EQ(funnel(NULL, 0).kind, SC_GO_NOT_GO);
	T_EQ(funnel(shebang, sizeof(shebang)).kind, SC_GO_NOT_GO);
	/* the magic, then nothing */
	T_EQ(funnel((const unsigned char *)ELFMAG, SELFMAG).kind, SC_GO_NOT_GO);

	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img im = build(&sp);
	im.p[0] = 'M';
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	im.p[EI_CLASS] = ELFCLASS32;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	im.p[EI_DATA] = ELFDATA2MSB;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_phentsize = sizeof(Elf32_Phdr);
	expect(&im, SC_GO_NOT_GO);
}

/* every prefix of a good image, each an allocation of its length: no
 * read past its end, and never OK before the image is whole enough */
T_TEST(truncated)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img whole = build(&sp);
	for (size_t n = 0; n <= whole.len; n++) {
		unsigned char *p = malloc(n ? n : 1);
		T_ASSERT(p);
		memcpy(p, whole.p, n);
		struct sc_go_funnel f = funnel(p, n);
		free(p);
		if (n < whole.len)
			T_ASSERTF(f.kind == SC_GO_NOT_GO, "%zu of %zu bytes: %s", n, whole.len,
				  kind_name(f.kind));
		else
			T_EQ(f.kind, SC_GO_OK);
	}
	free(whole.p);
}

/* random bytes, and a good image with random bytes over a part of it:
 * any kind, no read outside, the invariants kept (a fixed seed) */
T_TEST(garbage)
{
	struct t_rng r;
	t_rng_seed(&r, 0x60f0a11e1);
	static unsigned char junk[4096];
	for (int round = 0; round < 200; round++) {
		size_t n = t_rng_below(&r, sizeof(junk));
		for (size_t i = 0; i < n; i++)
			junk[i] = (unsigned char)t_rng_next(&r);
		unsigned char *p = malloc(n ? n : 1);
		T_ASSERT(p);
		memcpy(p, junk, n);
		T_EQ(funnel(p, n).kind, SC_GO_NOT_GO);
		free(p);
	}
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	int kinds[5] = { 0 };
	for (int round = 0; round < 2000; round++) {
		struct img im = build(&sp);
		size_t at = t_rng_below(&r, im.len), n = t_rng_range(&r, 1, 16);
		for (size_t i = at; i < at + n && i < im.len; i++)
			im.p[i] = (unsigned char)t_rng_next(&r);
		kinds[funnel(im.p, im.len).kind]++;
		free(im.p);
	}
	t_log("2000 scribbled images: NOT_GO %d, STATIC %d, ARCH %d, NO_FUNNEL %d, OK %d",
	      kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]);
}

/* ---- Go, but not one we patch ---------------------------------------- */

T_TEST(static_no_interp)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	sp.no_interp = true;
	struct img im = build(&sp);
	seed(&im, "static_no_interp");
	expect_why(&im, SC_GO_STATIC, "without cgo");
}

T_TEST(static_no_pthread)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	sp.no_pthread = true;
	struct img im = build(&sp);
	expect_why(&im, SC_GO_STATIC, "without cgo");
	/* pthread_create defined, not imported from libc */
	spec_go_sym(&sp, names[0], 64);
	sp.pthread_defined = true;
	im = build(&sp);
	expect(&im, SC_GO_STATIC);
	/* no dynamic symbols at all (.symtab's import does not count) */
	spec_go_sym(&sp, names[0], 64);
	sp.no_dynsym = true;
	im = build(&sp);
	expect(&im, SC_GO_STATIC);
}

T_TEST(arch)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	sp.machine = EM_AARCH64;
	struct img im = build(&sp);
	seed(&im, "arch_aarch64");
	expect_why(&im, SC_GO_ARCH, "another machine");
	/* another machine, static as well: the machine is said first */
	sp.no_interp = true;
	im = build(&sp);
	expect(&im, SC_GO_ARCH);
	/* not Go at all: not Go, whatever the machine */
	sp.go_sec = "";
	im = build(&sp);
	expect(&im, SC_GO_NOT_GO);
}

/* ---- found by its symbol --------------------------------------------- */

/* each name Syscall6 had, at its address; a second copy of the prologue
 * elsewhere does not matter when the symbol says which */
T_TEST(ok_symbol)
{
	static const char *const seeds[] = { "ok_symbol_linux", "ok_symbol_internal", NULL };
	for (unsigned i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct spec sp;
		spec_go_sym(&sp, names[i], 128);
		struct img im = build(&sp);
		if (seeds[i])
			seed(&im, seeds[i]);
		expect_ok(&im, names[i], 128);
		prologue_at(sp.text + 320);
		im = build(&sp);
		expect_ok(&im, names[i], 128);
		/* at an offset off Go's alignment: the symbol is believed */
		spec_go_sym(&sp, names[i], 72);
		im = build(&sp);
		expect_ok(&im, names[i], 72);
	}
}

/* a name of the list with something after it, or a prefix of one, is
 * not it: the stripped path finds the same bytes */
T_TEST(ok_symbol_near_names)
{
	struct spec sp;
	spec_go_sym(&sp, "internal/runtime/syscall/linux.Syscall6X", 96);
	struct img im = build(&sp);
	expect_ok_stripped(&im, 96);
	spec_go_sym(&sp, "internal/runtime/syscall/linux.Syscall", 96);
	im = build(&sp);
	expect_ok_stripped(&im, 96);
	/* the right name on an object, not a function: not it either */
	spec_go_sym(&sp, names[0], 96);
	sp.sym_type = STT_OBJECT;
	im = build(&sp);
	expect_ok_stripped(&im, 96);
}

/* the symbol is there, its bytes are not the prologue's */
T_TEST(symbol_bytes_differ)
{
	for (unsigned i = 0; i < sizeof(names) / sizeof(*names); i++) {
		struct spec sp;
		spec_go_sym(&sp, names[i], 128);
		sp.text[128 + 12] = 0x90;       /* no SYSCALL */
		struct img im = build(&sp);
		if (!i)
			seed(&im, "symbol_bytes_differ");
		expect_why(&im, SC_GO_NO_FUNNEL, "Syscall6 does not start");
		/* the prologue elsewhere: the symbol still says where Syscall6 is */
		prologue_at(sp.text + 256);
		im = build(&sp);
		expect(&im, SC_GO_NO_FUNNEL);
	}
	/* the last byte differs */
	struct spec sp;
	spec_go_sym(&sp, names[0], 128);
	sp.text[128 + SC_GO_PROLOGUE_LEN - 1] ^= 1;
	struct img im = build(&sp);
	expect(&im, SC_GO_NO_FUNNEL);
}

/* the symbol's address in no segment, or too near a segment's end for
 * 20 bytes: not read */
T_TEST(symbol_outside)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img im = build(&sp);
	Elf64_Sym *y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	y[2].st_value = TEXT_VADDR + 0x100000;
	expect(&im, SC_GO_NO_FUNNEL);
	im = build(&sp);
	y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	y[2].st_value = TEXT_VADDR + TEXT_LEN - SC_GO_PROLOGUE_LEN + 1;
	expect(&im, SC_GO_NO_FUNNEL);
	im = build(&sp);
	y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	y[2].st_value = TEXT_VADDR - 1;
	expect(&im, SC_GO_NO_FUNNEL);
	/* the last 20 bytes of the segment: read, and they are it */
	spec_init(&sp);
	sp.sym = names[0];
	sp.sym_at = TEXT_LEN - SC_GO_PROLOGUE_LEN;
	memcpy(sp.text + TEXT_LEN - SC_GO_PROLOGUE_LEN, sc__go_prologue, SC_GO_PROLOGUE_LEN);
	im = build(&sp);
	expect_ok(&im, names[0], TEXT_LEN - SC_GO_PROLOGUE_LEN);
}

/* ---- stripped: found by its first bytes ------------------------------ */

T_TEST(stripped_once)
{
	struct spec sp;
	spec_go(&sp, 160);
	struct img im = build(&sp);
	seed(&im, "stripped_once");
	expect_ok_stripped(&im, 160);
	/* at the text's very start and at its last aligned place that holds it */
	spec_go(&sp, 0);
	im = build(&sp);
	expect_ok_stripped(&im, 0);
	spec_go(&sp, TEXT_LEN - 32);
	im = build(&sp);
	expect_ok_stripped(&im, TEXT_LEN - 32);
	/* once aligned, once not: the aligned one */
	spec_go(&sp, 160);
	memcpy(sp.text + 200, sc__go_prologue, SC_GO_PROLOGUE_LEN);
	im = build(&sp);
	expect_ok_stripped(&im, 160);
}

T_TEST(stripped_twice)
{
	struct spec sp;
	spec_go(&sp, 64);
	prologue_at(sp.text + 384);
	struct img im = build(&sp);
	seed(&im, "stripped_twice");
	expect_why(&im, SC_GO_NO_FUNNEL, "more than once");
}

T_TEST(stripped_unaligned)
{
	static const uint32_t at[] = { 1, 8, 16, 24, 31, 33, 100, TEXT_LEN - SC_GO_PROLOGUE_LEN };
	for (unsigned i = 0; i < sizeof(at) / sizeof(*at); i++) {
		struct spec sp;
		spec_init(&sp);
		memcpy(sp.text + at[i], sc__go_prologue, SC_GO_PROLOGUE_LEN);
		struct img im = build(&sp);
		if (at[i] == 8)
			seed(&im, "stripped_unaligned");
		expect_why(&im, SC_GO_NO_FUNNEL, "no system-call funnel");
	}
	/* the segment's own address off the alignment: alignment is the
	 * address's, not the file offset's */
	struct spec sp;
	spec_go(&sp, 64);
	struct img im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_vaddr += 8;
	expect(&im, SC_GO_NO_FUNNEL);
	spec_init(&sp);
	memcpy(sp.text + 24, sc__go_prologue, SC_GO_PROLOGUE_LEN);
	im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_vaddr += 8;
	struct sc_go_funnel f = expect(&im, SC_GO_OK);
	T_EQ(f.vaddr, TEXT_VADDR + 32);
}

T_TEST(stripped_none)
{
	struct spec sp;
	spec_init(&sp);
	struct img im = build(&sp);
	expect_why(&im, SC_GO_NO_FUNNEL, "no system-call funnel");
	/* the first 19 bytes only */
	memcpy(sp.text + 64, sc__go_prologue, SC_GO_PROLOGUE_LEN - 1);
	im = build(&sp);
	expect(&im, SC_GO_NO_FUNNEL);
}

/* the prologue in a segment that does not execute: not looked at */
T_TEST(stripped_not_exec)
{
	struct spec sp;
	spec_init(&sp);
	sp.data_load = true;
	prologue_at(sp.data + 32);
	struct img im = build(&sp);
	expect(&im, SC_GO_NO_FUNNEL);
	/* with the real one in the text: that one, once */
	prologue_at(sp.text + 96);
	im = build(&sp);
	expect_ok_stripped(&im, 96);
}

/* ---- offsets that lie ------------------------------------------------- */

/* e_phoff, e_phnum, e_shoff, e_shnum, e_shstrndx past the end */
T_TEST(bad_headers)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img im = build(&sp);
	ehdr(&im)->e_phoff = im.len;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_phoff = UINT64_MAX - 7;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_phnum = 0xffff;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_phoff = 4;         /* in the file, not aligned */
	expect(&im, SC_GO_NOT_GO);
	/* no section headers: no Go section to see */
	im = build(&sp);
	ehdr(&im)->e_shoff = im.len;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_shoff = UINT64_MAX - 7;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_shnum = 0xffff;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_shoff += 4;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_shstrndx = ehdr(&im)->e_shnum;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	ehdr(&im)->e_shentsize = 32;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	Elf64_Shdr *ss = shdr(&im, ".shstrtab");
	ss->sh_offset = im.len;
	ss->sh_size = 1;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".shstrtab")->sh_size = UINT64_MAX;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".shstrtab")->sh_type = SHT_NOBITS;
	expect(&im, SC_GO_NOT_GO);
	/* the text segment past the end: nothing to find there */
	im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_offset = im.len - 8;
	expect(&im, SC_GO_NO_FUNNEL);
	/* a segment claiming more than the file: the symbol's 20 bytes are
	 * in the file all the same; the stripped path reads none of it */
	im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_filesz = UINT64_MAX;
	expect_ok(&im, names[0], 64);
	spec_go(&sp, 64);
	im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_filesz = UINT64_MAX;
	expect(&im, SC_GO_NO_FUNNEL);
	im = build(&sp);
	phdr_of(&im, PT_LOAD)->p_filesz = im.len;
	expect(&im, SC_GO_NO_FUNNEL);
}

/* a section's sh_offset, sh_size or sh_name past the end */
T_TEST(bad_sections)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img im = build(&sp);
	shdr(&im, ".go.buildinfo")->sh_offset = im.len;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".go.buildinfo")->sh_size = UINT64_MAX;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".go.buildinfo")->sh_type = SHT_NOBITS;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".go.buildinfo")->sh_name = 0xfffffff0;
	expect(&im, SC_GO_NOT_GO);
	im = build(&sp);
	shdr(&im, ".go.buildinfo")->sh_name = (uint32_t)shdr(&im, ".shstrtab")->sh_size - 1;
	expect(&im, SC_GO_NOT_GO);
	/* .dynsym or .dynstr unreadable: no import seen */
	im = build(&sp);
	shdr(&im, ".dynsym")->sh_offset = UINT64_MAX - 100;
	expect(&im, SC_GO_STATIC);
	im = build(&sp);
	shdr(&im, ".dynstr")->sh_offset = im.len;
	shdr(&im, ".dynstr")->sh_size = 16;
	expect(&im, SC_GO_STATIC);
	im = build(&sp);
	shdr(&im, ".dynsym")->sh_entsize = 16;
	expect(&im, SC_GO_STATIC);
	/* .symtab unreadable: the stripped path finds the same bytes */
	im = build(&sp);
	shdr(&im, ".symtab")->sh_offset = im.len;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".symtab")->sh_size = im.len;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".symtab")->sh_size = UINT64_MAX;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".strtab")->sh_offset = UINT64_MAX;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".strtab")->sh_type = SHT_NOBITS;
	expect_ok_stripped(&im, 64);
	/* a .symtab size that is not a whole number of symbols: the whole
	 * ones (here without the funnel's, the third, then with it) */
	im = build(&sp);
	shdr(&im, ".symtab")->sh_size = 3 * sizeof(Elf64_Sym) - 1;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".symtab")->sh_size += sizeof(Elf64_Sym) - 1;
	expect_ok(&im, names[0], 64);
}

/* sh_link past the section headers, st_name past the strings */
T_TEST(bad_links)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	struct img im = build(&sp);
	shdr(&im, ".symtab")->sh_link = ehdr(&im)->e_shnum;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".symtab")->sh_link = 0xffffffff;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	shdr(&im, ".dynsym")->sh_link = 0xffff;
	expect(&im, SC_GO_STATIC);
	/* a symbol's name past the string table, or its last bytes */
	im = build(&sp);
	Elf64_Shdr *st = shdr(&im, ".strtab");
	Elf64_Sym *y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	y[2].st_name = 0xffffffff;
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	st = shdr(&im, ".strtab");
	y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	y[2].st_name = (uint32_t)st->sh_size;
	expect_ok_stripped(&im, 64);
	/* the name's terminating NUL outside the table */
	im = build(&sp);
	st = shdr(&im, ".strtab");
	y = (Elf64_Sym *)(im.p + shdr(&im, ".symtab")->sh_offset);
	st->sh_size = y[2].st_name + strlen(names[0]);
	expect_ok_stripped(&im, 64);
	im = build(&sp);
	Elf64_Shdr *ds = shdr(&im, ".dynstr");
	y = (Elf64_Sym *)(im.p + shdr(&im, ".dynsym")->sh_offset);
	y[1].st_name = (uint32_t)ds->sh_size + 1;
	expect(&im, SC_GO_STATIC);
}

/* a symbol table at an offset its entries are not aligned at */
T_TEST(symtab_misaligned)
{
	struct spec sp;
	spec_go_sym(&sp, names[0], 64);
	sp.symtab_misaligned = true;
	struct img im = build(&sp);
	T_EQ(shdr(&im, ".symtab")->sh_offset % 8, 4);
	seed(&im, "symtab_misaligned");
	struct sc_go_funnel f = funnel(im.p, im.len);
	free(im.p);
	T_ASSERT(f.kind == SC_GO_OK);
	T_EQ(f.vaddr, TEXT_VADDR + 64);
}

/* Go 1.19 and 1.20 (their netpoller's epoll calls are stubs of their
 * own) stay on TCP; 1.21 and later, and a version not written in the
 * form the finder reads, are taken */
T_TEST(version)
{
	static const struct {
		const char *v;
		enum sc_go_kind want;
	} cases[] = {
		{ "go1.19.8", SC_GO_NO_FUNNEL }, { "go1.20", SC_GO_NO_FUNNEL },
		{ "go1.21.13", SC_GO_OK }, { "go1.27.3", SC_GO_OK }, { "go1.100", SC_GO_OK },
		{ "devel +abc", SC_GO_OK }, { "go1.", SC_GO_OK },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct spec sp;
		spec_go_sym(&sp, names[0], 64);
		sp.version = cases[i].v;
		struct img im = build(&sp);
		struct sc_go_funnel f = funnel(im.p, im.len);
		free(im.p);
		T_ASSERTF(f.kind == cases[i].want, "%s: kind %d, want %d", cases[i].v, f.kind,
			  cases[i].want);
		if (f.kind != SC_GO_OK)
			T_ASSERT(strstr(f.why, "Go 1.21 and later"));
	}
}

T_MAIN(NULL,
       T_ENTRY(not_go), T_ENTRY(not_elf), T_ENTRY(version), T_ENTRY(truncated), T_ENTRY(garbage),
       T_ENTRY(static_no_interp), T_ENTRY(static_no_pthread), T_ENTRY(arch),
       T_ENTRY(ok_symbol), T_ENTRY(ok_symbol_near_names), T_ENTRY(symbol_bytes_differ),
       T_ENTRY(symbol_outside), T_ENTRY(stripped_once), T_ENTRY(stripped_twice),
       T_ENTRY(stripped_unaligned), T_ENTRY(stripped_none), T_ENTRY(stripped_not_exec),
       T_ENTRY(bad_headers), T_ENTRY(bad_sections), T_ENTRY(bad_links),
       T_ENTRY(symtab_misaligned))
