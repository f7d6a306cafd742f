/* SPDX-License-Identifier: MIT */
/*
 * The crowding test that stops spins (spin.c): the kernel's CPU pressure
 * read from /proc/pressure/cpu, its verdict on a window, and a machine
 * made crowded on purpose judged so; and how the waits of a set-up learn
 * whether spinning pays.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "config.h"
#include "spin.h"
#include "t_util.h"

T_TEST(psi_parse)
{
	T_EQ(sc__psi_some_us("some avg10=0.46 avg60=12.31 avg300=16.67 total=7988592983\n"
			     "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
	     7988592983LL);
	/* the "some" line's, wherever it is */
	T_EQ(sc__psi_some_us("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
			     "some avg10=1.00 avg60=0.00 avg300=0.00 total=42\n"), 42);
	T_EQ(sc__psi_some_us("some avg10=0.00 avg60=0.00 avg300=0.00 total=0"), 0);
	/* not a pressure file: no verdict */
	T_EQ(sc__psi_some_us(""), -1);
	T_EQ(sc__psi_some_us("some avg10=0.00 avg60=0.00 avg300=0.00\n"
			     "full avg10=0.00 avg60=0.00 avg300=0.00 total=9\n"), -1);
	T_EQ(sc__psi_some_us("some avg10=0.00 total=\n"), -1);
	T_EQ(sc__psi_some_us("some total=99999999999999999999999\n"), -1);
	T_EQ(sc__psi_some_us("something total=3\n"), -1);
}

T_TEST(psi_this_machine)
{
	FILE *f = fopen("/proc/pressure/cpu", "r");
	if (!f) {
		t_log("no /proc/pressure/cpu here (the /proc/loadavg count decides)");
		return;
	}
	char buf[256];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* a kernel with psi=0 fails the read (EOPNOTSUPP) */
	if (n)
		T_ASSERT(sc__psi_some_us(buf) >= 0);
}

T_TEST(psi_verdict)
{
	/* crowded: some thread waited for a CPU over a fifth of the window */
	T_ASSERT(!sc__psi_crowded(0, 10000));
	T_ASSERT(!sc__psi_crowded(2000, 10000));
	T_ASSERT(sc__psi_crowded(2001, 10000));
	T_ASSERT(sc__psi_crowded(25000, 10000));
	/* a thread woken for 40 us in 10 ms (a control thread's turn) */
	T_ASSERT(!sc__psi_crowded(40, 10000));
}

/* Budgets asked until one is given: the waits that did not spin. */
static unsigned unspun(struct sc_spin_class *k, uint32_t *b)
{
	unsigned n = 0;
	while (!(*b = sc__spin_class_budget(k)))
		T_ASSERT(++n < 1000);
	return n;
}

T_TEST(setup_class)
{
	uint32_t max = sc__cfg.spin_ns = 50000, b;
	struct sc_spin_class k = SC_SPIN_SETUP_INIT;
	/* the whole budget at once, and after up to 4 misses of 16 */
	T_EQ(sc__spin_class_budget(&k), max);
	for (int i = 0; i < 4; i++)
		T_EQ(sc__spin_class_done(&k, max, false), max);
	T_EQ(sc__spin_class_budget(&k), max);
	for (int i = 0; i < 12; i++)
		T_EQ(sc__spin_class_done(&k, max, true), max);
	/* the misses age out: 4 more still spin; the 5th in 16 stops it */
	for (int i = 0; i < 4; i++)
		T_EQ(sc__spin_class_done(&k, max, false), max);
	T_EQ(sc__spin_class_done(&k, max, false), 0);
	/* then a probe of the whole budget every 32nd wait */
	T_EQ(unspun(&k, &b), 0);        /* the first wait after: a probe */
	T_EQ(b, max);
	T_EQ(sc__spin_class_done(&k, b, false), 0);
	T_EQ(unspun(&k, &b), 31);
	T_EQ(b, max);
	/* whose hit makes it spin again, afresh: 4 misses allowed */
	T_EQ(sc__spin_class_done(&k, b, true), max);
	for (int i = 0; i < 4; i++)
		T_EQ(sc__spin_class_done(&k, max, false), max);
	T_EQ(sc__spin_class_budget(&k), max);
	/* no spinning configured: none */
	sc__cfg.spin_ns = 0;
	T_EQ(sc__spin_class_budget(&k), 0);
}

T_TEST(halving_class)
{
	uint32_t max = sc__cfg.spin_ns = 64000, b;
	struct sc_spin_class k = SC_SPIN_CLASS_INIT;
	/* a miss halves, a hit doubles, under max / 16 nothing */
	T_EQ(sc__spin_class_budget(&k), max);
	T_EQ(sc__spin_class_done(&k, max, false), max / 2);
	T_EQ(sc__spin_class_budget(&k), max / 2);
	T_EQ(sc__spin_class_done(&k, max / 2, true), max);
	b = max;
	for (int i = 0; i < 4; i++)
		b = sc__spin_class_done(&k, b, false);
	T_EQ(b, max / 16);
	T_EQ(sc__spin_class_done(&k, b, false), 0);
	/* then a probe of an eighth every 32nd wait */
	T_EQ(unspun(&k, &b), 0);
	T_EQ(b, max / 8);
	T_EQ(unspun(&k, &b), 31);
	sc__cfg.spin_ns = 0;
}

static atomic_bool stop;

static void *burn(void *arg)
{
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		;
	return NULL;
}

static uint64_t ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

#define MAX_BURN 257

/* Twice as many busy threads as CPUs, and one more: the machine is
 * crowded by any measure, and the verdict says so -- the first one (which
 * has no earlier pressure sample to compare with) and every one of the
 * next 50 ms, five samples or more of the pressure's growth. */
T_TEST(crowded_machine)
{
	cpu_set_t set;
	T_OK(sched_getaffinity(0, sizeof(set), &set));
	int n = 2 * CPU_COUNT(&set) + 1;
	if (n > MAX_BURN)
		n = MAX_BURN;
	pthread_t th[MAX_BURN];
	for (int i = 0; i < n; i++)
		T_EQ(pthread_create(&th[i], NULL, burn, NULL), 0);
	uint64_t t0 = ms_now(), first = 0, calls = 0, t;
	bool crowded = true;
	do {
		bool c = sc__spin_crowded();
		t = ms_now();
		if (!first && c)
			first = t;
		else if (first) {
			crowded &= c;
			calls++;
		}
	} while (crowded && (first ? t - first < 50 : t - t0 < 60000));
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	t_log("%d busy threads: crowded after %llu ms, then %llu verdicts", n,
	      (unsigned long long)(first - t0), (unsigned long long)calls);
	T_ASSERT(first);
	T_ASSERT(crowded);
}

T_MAIN(NULL, T_ENTRY(psi_parse), T_ENTRY(psi_this_machine), T_ENTRY(psi_verdict),
       T_ENTRY(crowded_machine), T_ENTRY(setup_class), T_ENTRY(halving_class))
