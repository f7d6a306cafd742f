/* SPDX-License-Identifier: MIT */
/*
 * Where a Go program makes its system calls.  Since Go 1.19 every socket,
 * connect, accept4, read, write, close, fcntl and the netpoller's epoll
 * calls go through one assembly function, Syscall6 (its package moved:
 * runtime/internal/syscall, then internal/runtime/syscall, now
 * internal/runtime/syscall/linux), whose body starts with
 * the same 20 bytes in every release: four register moves into the system
 * call's order, SYSCALL, and the error compare.
 *
 * sc__go_funnel reads an ELF file's image (the whole file, mapped) and says
 * whether that function is there and where: by its symbol, else (a
 * stripped binary) by those 20 bytes, found once, on Go's 32-byte function
 * alignment, in the executable segment.  Go 1.19 and 1.20 have the funnel
 * but make their netpoller's epoll calls with stubs of their own: only a
 * program whose .go.buildinfo says Go 1.21 or later (or says nothing we
 * can read) is taken.  Only a program that links libc's
 * threads (cgo: runtime/cgo starts every thread with pthread_create) can
 * run our C code on its threads; a static Go program cannot.
 *
 * Used by the interposer at start-up (src/interposer/go.c, on
 * /proc/self/exe) and by `shortcut run` and `shortcut doctor`
 * (cli/target.c), which say the same thing the same way.  No system calls:
 * the caller maps the file.
 */
#ifndef SC_GOFUNNEL_H
#define SC_GOFUNNEL_H

#include <stddef.h>
#include <stdint.h>

enum sc_go_kind {
	SC_GO_NOT_GO,           /* no Go sections: not a Go program (or not ELF) */
	SC_GO_STATIC,           /* Go without libc threads (no cgo: CGO_ENABLED=0...) */
	SC_GO_ARCH,             /* Go for another machine than x86-64 */
	SC_GO_NO_FUNNEL,        /* Go with libc, but no funnel we can use (Go < 1.21, changed) */
	SC_GO_OK,               /* vaddr is the funnel */
};

#define SC_GO_PROLOGUE_LEN 20
extern const unsigned char sc__go_prologue[SC_GO_PROLOGUE_LEN];

struct sc_go_funnel {
	enum sc_go_kind kind;
	uint64_t vaddr;         /* SC_GO_OK: its address in the file's terms (add the load bias) */
	const char *found_by;   /* SC_GO_OK: the symbol's name, or "its first bytes" */
	const char *why;        /* otherwise: one sentence, for logs and `shortcut doctor` */
};

/* Fills *f from the image img[0, len).  Never fails: a file it cannot read
 * is SC_GO_NOT_GO. */
void sc__go_funnel(const unsigned char *img, size_t len, struct sc_go_funnel *f);

#endif
