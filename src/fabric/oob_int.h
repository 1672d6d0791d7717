/* SPDX-License-Identifier: Apache-2.0 */
/* Folder-private parts of the out-of-band update backends: their ops
 * structs for the registry in oob.c. */
/* Private to src/fabric/oob.c and src/fabric/oob_sim.c; nothing else
 * includes it. */
#ifndef NVL72_OOB_INT_H
#define NVL72_OOB_INT_H

#include "nvl72/oob.h"

extern const struct oob_backend_ops oob_sim_ops;

#endif
