/* SPDX-License-Identifier: MIT */
/*
 * xhost.h - what a connection between two hosts needs besides its channel: the process's
 * libfabric endpoint (plugin/ofi.h), opened on first use, and the handshake that pairs a
 * connect with its listener directly, process to process, without the daemons:
 *   HELLO    connector -> listener  its address, node and NIC, and a nonce
 *   WELCOME  listener -> connector  the connection's id (the listener's process hands them
 *                                   out, so they are unique among the channels into it), or
 *                                   an error
 * The channel itself is sim/core/xchan.h; plugin/conn.c builds the comms. docs/scale-out.md
 * §3 has the design.
 *
 * Cross-host connections are on when SIMFABRIC_HOST names this process's host (0..65535,
 * set by the launcher for each rank); a listen handle then carries the host and the endpoint's
 * address (handle version 2), and a connect to another host's handle comes here.
 *
 * Threads: under sfnet_g.lock (plugin/net_int.h), like the rest of setup.
 * Errors: negative errno values; every failure has already been logged (PWARN) with what
 * failed and where.
 * Ownership: sfxh_listen_new / sfxh_pconn_new objects are freed by their _free (NULL-safe),
 * which waits (bounded) for the transport to give back what it holds.
 */
#ifndef SF_XHOST_H
#define SF_XHOST_H

#include <stdint.h>

#include "plugin/net.h"
#include "plugin/ofi.h"
#include "sim/core/xnet.h"

#define SFXH_NODE_LEN 64

/* The cross-host part of a version-2 listen handle (struct sfnet_handle2, plugin/net.h). */
struct sfxh_addr {
	uint16_t host;
	uint16_t len;  /* of addr */
	uint32_t port; /* the listener's handshake port in its process */
	uint8_t addr[SFOFI_ADDR_MAX];
};

/* A paired connection: the peer's address for the transport and the connection's id. */
struct sfxh_peer {
	uint64_t peer;
	uint32_t conn;
	uint32_t nic;		  /* the peer's NIC index on its node */
	uint32_t nonce;		  /* the connector's name for its handshake */
	uint32_t host;		  /* the peer's host */
	uint32_t rail;		  /* this process's endpoint pair the connection runs on */
	char node[SFXH_NODE_LEN]; /* the peer's node, for messages */
};

/*
 * A process's endpoints, one per direction (xhost.c says why): listeners and the recvComms'
 * channels use an rx one, connects and the sendComms' channels a tx one. With
 * SIMFABRIC_XHOST_RAILS=N (1 to SFXH_RAILS_MAX, default 1) there are N of each, opened as
 * needed: listeners take the rx rails in turn and connects the tx rails, so a process's
 * connections (NCCL's channels) spread over N transport connections, each with its own lock,
 * as a NIC spreads queue pairs over its engines. A connection stays on its rail.
 */
enum sfxh_side { SFXH_RX = 0, SFXH_TX = 1 };
#define SFXH_RAILS_MAX 8

/* This process's host (SIMFABRIC_HOST), or -1: cross-host connections are off. */
int sfxh_host(void);
/* SIMFABRIC_XHOST_RAILS (read once; a malformed value is a WARN and 1). */
int sfxh_rails(void);
/*
 * SIMFABRIC_XHOST_WRITE=on|off|BYTES (read once; default on): payloads of at least this many
 * bytes (on: SFXH_WRITE_MIN) go as one-sided writes into the receiver's registered buffers
 * (sim/core/xchan.h), where the provider writes; 0 (off): every payload as a message. A
 * malformed value is a WARN and the default.
 */
#define SFXH_WRITE_MIN 16384 /* rxm's eager limit: below it a message is one trip already */
#define SFXH_WRITE_MAX_MIN (1ull << 30)
uint64_t sfxh_write_min(void);
/* The transport of that side's rail (NULL before that endpoint is open). */
const struct xnet *sfxh_net(enum sfxh_side side, uint32_t rail);
/* The receive agent's pump (ofi.h): mark the open rx endpoints pumped or not, and drive each
 * once (the completions found, -ENODEV before one is open, or a transport's error). */
void sfxh_pumped(int on);
int sfxh_pump(void);

struct sfxh_listen;
/* A listener's handshake: opens the endpoint if needed, posts the receive for HELLO, fills
 * *a. 0 or a negative errno (then only same-host peers can connect). */
int sfxh_listen_new(const char *what, struct sfxh_listen **out, struct sfxh_addr *a);
/* A HELLO waiting? 1 with *p filled, a fresh connection id included (the caller then opens
 * its receive end and answers with sfxh_welcome), 0 none yet (a malformed one is logged and
 * dropped), < 0 the listener's handshake failed (logged): the listener should fail. */
int sfxh_accept_poll(struct sfxh_listen *l, struct sfxh_peer *p);
/* Answer the HELLO accept_poll returned: status 0 (the receive end is open) or an errno. */
int sfxh_welcome(struct sfxh_listen *l, const struct sfxh_peer *p, int status);
void sfxh_listen_free(struct sfxh_listen *l);

struct sfxh_pconn;
/* Send HELLO to the listener at a (our node, our NIC dev). 0 or a negative errno. */
int sfxh_pconn_new(const struct sfxh_addr *a, const char *node, uint32_t nic, const char *what,
		   struct sfxh_pconn **out);
/* The WELCOME: 1 with *p filled, 0 not yet, < 0 refused or failed (logged). */
int sfxh_pconn_poll(struct sfxh_pconn *pc, struct sfxh_peer *p);
void sfxh_pconn_free(struct sfxh_pconn *pc);

#endif /* SF_XHOST_H */
