/* SPDX-License-Identifier: Apache-2.0 */
/* Folder-private parts of the out-of-band update backends: their ops
 * structs for the registry in oob.c. */
#ifndef NVL72_OOB_INT_H
#define NVL72_OOB_INT_H

#include "nvl72/oob.h"

extern const struct oob_backend_ops oob_sim_ops;

#endif
