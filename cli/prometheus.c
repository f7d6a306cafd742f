/* SPDX-License-Identifier: MIT */
/*
 * shortcut stats --prometheus: the run directory's counters in the
 * Prometheus text exposition format (version 0.0.4), for node_exporter's
 * textfile collector:
 *
 *   shortcut stats --prometheus > DIR/shortcut.prom.$$ && mv DIR/shortcut.prom.$$ DIR/shortcut.prom
 *
 * Every family has its HELP and TYPE; counters end in _total.  The
 * counters are sums over the processes of the run directory, the running
 * ones and those that exited (their counters were kept), so they only grow,
 * except after `shortcut stats --reset` (a counter reset, as Prometheus
 * understands one).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "stats.h"

/* the sums are plain numbers (statsread.c adds them up in a uint64_t array) */
#define V(f) ((unsigned long long)*(const uint64_t *)&s->f)

static void family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped. */
static void label_value(const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			printf("\\%c", *v);
		else if (*v == '\n')
			printf("\\n");
		else
			putchar(*v);
	}
}

/* the fallback reasons' family, and the switches (counters.def) */
static void fallbacks(const struct sc_counters *s)
{
	family("shortcut_fallbacks_total", "counter", "TCP connections that stayed on kernel "
	       "TCP, by reason (shortcut(7), FALLBACK REASONS).");
	for (int i = 0; i < SC_FB_MAX; i++)
		if (sc__fallback_names[i] && i != SC_FB_SWITCHED)
			printf("shortcut_fallbacks_total{reason=\"%s\"} %llu\n", sc__fallback_names[i],
			       V(fallback[i]));
	family("shortcut_switches_total", "counter", "Connection halves switched from shared "
	       "memory back to TCP while open (exec, SCM_RIGHTS, io_uring, urgent data, "
	       "shortcut off).");
	printf("shortcut_switches_total %llu\n", V(fallback[SC_FB_SWITCHED]));
}

int sc__stats_prometheus(const char *dir, unsigned long long procs, unsigned long long live,
			 const struct sc_counters *s)
{
	family("shortcut_info", "gauge", "The shortcut that wrote these metrics, and the run "
	       "directory they are from.");
	printf("shortcut_info{version=\"%s\",rundir=\"", SC_VERSION);
	label_value(dir);
	printf("\"} 1\n");
	family("shortcut_processes", "gauge", "Processes whose counters are summed here "
	       "(running and exited).");
	printf("shortcut_processes %llu\n", procs);
	family("shortcut_processes_running", "gauge", "Of those, the processes still running.");
	printf("shortcut_processes_running %llu\n", live);

	for (size_t i = 0; i < sc__ncounter_descs; i++) {
		const struct sc_counter_desc *f = &sc__counter_descs[i];
		if (!sc__counter_first(f, true))
			continue;
		family(f->family, f->type, f->help);
		bool fb = false;        /* the reasons follow conns_fallback's family */
		for (size_t j = i; j < sc__ncounter_descs; j++) {
			const struct sc_counter_desc *d = &sc__counter_descs[j];
			if (strcmp(d->family, f->family))
				continue;
			printf("%s%s%s%s %llu\n", d->family, *d->labels ? "{" : "", d->labels,
			       *d->labels ? "}" : "", sc__counter_value(s, d));
			fb |= d->off == offsetof(struct sc_counters, conns_fallback);
		}
		if (fb)
			fallbacks(s);
	}
	return ferror(stdout) ? 1 : 0;
}
