/* SPDX-License-Identifier: Apache-2.0 */
/* The base module in one include: allocation, bounded buffers, checked
 * parsing, errors, logging and time. Every other module builds on it. */
/* How the headers state their contracts (who owns what a call returns,
 * which thread may call it, whether it blocks) and the words they use for
 * it are in docs/internals/headers.md. The base module's own rule: calls on
 * a caller's object (a struct buf) are one thread per object; the logger,
 * the metrics registry, errors and clocks may be used from any thread. */
#ifndef NVL72_BASE_H
#define NVL72_BASE_H

#include "nvl72/alloc.h"
#include "nvl72/buf.h"
#include "nvl72/err.h"
#include "nvl72/log.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Makes a static function visible to the unit tests only. */
#ifdef NVL72_UNIT_TEST
#define TESTABLE
#else
#define TESTABLE static
#endif

#endif
