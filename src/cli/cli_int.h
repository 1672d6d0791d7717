/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of the kubectl plugin: reading conditions,
 * tray sets, durations and the approval state of an upgrade out of the
 * JSON the apiserver returns. Nothing here talks to the apiserver; all of
 * it is defined in cli_read.c, which needs no other file of the folder. */
/* Private to src/cli/ and its unit tests (tests/unit/cli/); other code goes
 * through nvl72/cli.h. */
#ifndef NVL72_CLI_INT_H
#define NVL72_CLI_INT_H

#include "nvl72/cli.h"

/* A condition's status ("True", "False", "Unknown"), "Unknown" if absent. */
const char *cli_cond_status(const json_t *obj, const char *type);
/* A condition's message, "" if absent. */
const char *cli_cond_message(const json_t *obj, const char *type);

/* A tray index array as "1-2,5"; "-" when empty. */
void cli_trays_str(const json_t *arr, char *out, size_t outsz);
/* A duration as "2d3h", "4h5m", "45m" or "30s". */
void cli_duration(int64_t ms, char *out, size_t outsz);

/* The Rack's responsibility entry of a layer, or NULL. */
const json_t *cli_rack_resp(const json_t *rack, const char *layer);

/* Whether the upgrade's status holds an approval of layer with the given
 * decision ("Approved" or "Rejected"); *user receives its user. */
bool cli_approval_has(const json_t *status, const char *layer, const char *decision,
                      const char **user);

/* The pending approval layers as "fabric (platform-fabric), ..." into out,
 * with the owner team from rack when it is known; "-" when none. */
void cli_pending_str(const json_t *status, const json_t *rack, bool groups, struct buf *out);

/* The number of steps in status.steps. */
size_t cli_nsteps(const json_t *status);

#endif
