/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the stats files of the run directory (issue 15), which
 * any process of the user can write, and which a process killed mid-write
 * leaves half done.  The input is one stats file (the rest of it zero) and,
 * read from the same bytes, the retired counters; they go through
 * everything the tool and the collector read them with: `shortcut stat`
 * (table and --json), `shortcut off`'s count, `shortcut stats` (the sums;
 * table, --json, --prometheus), the liveness check and the collector's
 * fold.  Whatever the file holds: no access outside it (ASan, the file an
 * allocation of its exact size), no undefined behaviour (UBSan), no hang.
 *
 * Input: one byte of flags (bits 0-1: table, --json, --prometheus, the
 * fourth both lists; bit 2: the process counted as live), then the file.
 *
 *     make fuzz FUZZ_SECONDS=600        (tests/fuzz.sh; seeds in corpus/stats)
 *
 * Built with: src/rundir cli/statsread.c cli/prometheus.c cli/countertab.c cli/pidview.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rundir.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* what the tool prints goes nowhere (formatted all the same) */
	if (!freopen("/dev/null", "w", stdout))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (!n)
		return 0;
	uint8_t flags = *d++;
	n--;
	/* allocations of the exact sizes: ASan sees a read past either */
	struct sc_stats_file *f = calloc(1, sizeof(*f));
	struct sc_stats_retired *r = malloc(sizeof(*r));
	if (!f || !r)
		abort();
	memcpy(f, d, n < sizeof(*f) ? n : sizeof(*f));
	memcpy(r, f, sizeof(*r));

	int k = 0, fmt = flags & 3;
	sc__stat_list(f, fmt == 1, &k);
	if (fmt == 3)
		sc__stat_list(f, false, &k);
	sc__stat_shm_conns(f);
	bool live = sc__stats_file_live(f) || (flags & 4);

	/* `shortcut stats`: the retired counters and two files (this one,
	 * live or not, twice) */
	struct sc_stats_sum s = { .procs = 0 };
	sc__stats_add_retired(&s, r);
	sc__stats_add_file(&s, f, live);
	sc__stats_add_file(&s, f, !live);
	sc__stats_print("/run/user/0/shortcut", &s, fmt == 1, fmt == 2);
	/* the collector: the file folded into the retired counters */
	sc__stats_fold(r, f);
	free(r);
	free(f);
	return 0;
}
