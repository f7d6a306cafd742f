/* SPDX-License-Identifier: MIT */
/*
 * An LD_PRELOAD library that interposes nothing: the `preload` transport of
 * bench/interposed.py's floor rows.  What a program pays for it (one more
 * object mapped, relocated and copied at every fork) is what any library
 * loaded this way costs, before it does anything; the rows that stay on
 * kernel TCP are judged beside it (docs/profile.md).
 */
int sc_bench_empty_preload(void);

int sc_bench_empty_preload(void)
{
	return 0;
}
