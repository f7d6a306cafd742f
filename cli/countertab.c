/* SPDX-License-Identifier: MIT */
/*
 * The counters as `shortcut stats` prints them, from their one declaration
 * (src/core/counters.def): where each sits in struct sc_counters, its JSON
 * key and object, its Prometheus family, labels, type and help.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli.h"
#include "stats.h"

const struct sc_counter_desc sc__counter_descs[] = {
#define SC_COUNTER(field, public, json, group, family, labels, type, help) \
	{ offsetof(struct sc_counters, field), json, group, family, labels, #type, help },
#include "counters.def"
};
const size_t sc__ncounter_descs = sizeof(sc__counter_descs) / sizeof(sc__counter_descs[0]);

/* every field of struct sc_counters is in the table (and fallback[]) */
_Static_assert(sizeof(struct sc_counters) == 8 * (SC_FB_MAX + 0
#define SC_COUNTER(...) + 1
#include "counters.def"
	       ), "struct sc_counters has a field counters.def does not declare");

unsigned long long sc__counter_value(const struct sc_counters *s, const struct sc_counter_desc *d)
{
	return *(const uint64_t *)((const char *)s + d->off);
}

/* d is the first of the table with its key (a JSON object, a Prometheus
 * family): those print their kind together, wherever they sit */
bool sc__counter_first(const struct sc_counter_desc *d, bool by_family)
{
	for (const struct sc_counter_desc *e = sc__counter_descs; e < d; e++) {
		const char *a = by_family ? e->family : e->group, *b = by_family ? d->family : d->group;
		if (a && b && !strcmp(a, b))
			return false;
	}
	return true;
}
