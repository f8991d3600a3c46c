/* SPDX-License-Identifier: MIT */
/*
 * dlist.h - an intrusive doubly linked list: a struct dl inside each object,
 * a struct dl as the list's head; dl_entry gets the object back. The daemon's
 * registries (sim/srv.c) keep their connections, sessions, listeners and
 * channels on these.
 */
#ifndef SF_DLIST_H
#define SF_DLIST_H

#include <stdbool.h>
#include <stddef.h>

struct dl {
	struct dl *prev, *next;
};

static inline void dl_init(struct dl *h)
{
	h->prev = h->next = h;
}

static inline bool dl_empty(const struct dl *h)
{
	return h->next == h;
}

static inline void dl_push(struct dl *h, struct dl *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void dl_del(struct dl *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#define dl_entry(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))
#define dl_each_safe(pos, tmp, head)                                                               \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);                           \
	     (pos) = (tmp), (tmp) = (pos)->next)

#endif /* SF_DLIST_H */
