/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the files of the matrix module, all defined in
 * matrix.c, which matrix_plan.c stands on. Not for other modules: they go
 * through nvl72/matrix.h. Included by src/matrix/matrix.c and
 * src/matrix/matrix_plan.c only. */
#ifndef NVL72_MATRIX_INT_H
#define NVL72_MATRIX_INT_H

#include "nvl72/matrix.h"

/* Expands one listed edge into plan steps appended to p (p->nsteps grows),
 * checking that every tuple between steps is a stack and that the last
 * step lands on the edge's target. On a failure the problem text is set
 * and false returned; p's steps may then be partly filled. */
bool matrix_edge_expand(const struct matrix *m, unsigned edge, struct matrix_plan *p);

/* Writes a formatted problem text into a MATRIX_PROBLEM_LEN buffer. */
void matrix_problem_set(char *problem, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
