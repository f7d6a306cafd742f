/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the ELF file in which sc__go_funnel looks for a Go
 * program's system-call funnel (src/core/gofunnel.c).  The interposer reads
 * /proc/self/exe with it at start-up, and `shortcut run` and `shortcut
 * doctor` read any program a user names: the file is the program's, not
 * ours.  The input is the whole file.  Whatever it holds: no read outside
 * it (ASan, the file an allocation of its exact size), no undefined
 * behaviour (UBSan), no hang, and an answer that keeps its promises: a
 * kind of the enum; SC_GO_OK names how it was found; every other kind
 * says why, with no address and no finder; not ELF is not Go; the same
 * answer twice.
 *
 *     make fuzz FUZZ=gofunnel FUZZ_SECONDS=600   (tests/fuzz.sh; seeds in
 *     corpus/gofunnel, written by SC_GOFUNNEL_SEEDS=DIR build/t/test_gofunnel)
 */
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gofunnel.h"

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "fuzz_gofunnel: %s\n", #x); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	/* an allocation of the exact size (malloc's alignment, as a mapping's) */
	unsigned char *img = malloc(n ? n : 1);
	if (!img)
		abort();
	memcpy(img, d, n);

	struct sc_go_funnel f, g;
	memset(&f, 0x5a, sizeof(f));
	sc__go_funnel(img, n, &f);
	CHECK(f.kind >= SC_GO_NOT_GO && f.kind <= SC_GO_OK);
	if (f.kind == SC_GO_OK) {
		CHECK(f.found_by && *f.found_by);
	} else {
		CHECK(f.why && *f.why);
		CHECK(!f.found_by && !f.vaddr);
	}
	if (n < SELFMAG || memcmp(img, ELFMAG, SELFMAG))
		CHECK(f.kind == SC_GO_NOT_GO);

	memset(&g, 0, sizeof(g));
	sc__go_funnel(img, n, &g);
	CHECK(g.kind == f.kind && g.vaddr == f.vaddr && g.found_by == f.found_by &&
	      g.why == f.why);
	free(img);
	return 0;
}
