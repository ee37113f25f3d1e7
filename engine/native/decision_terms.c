/* What the tracker's decision needs of the muscles and the ground at a physics state
 * (engine/control/tracking.py, TrackingController.muscle_terms) in plain C99: the Hill
 * factors, the moment arms A = dl/dq and the friction-pyramid edge Jacobians of the foot
 * corners near the floor.
 *
 * The numpy code is the definition (tracking.py's body_jacobians, contact_jacobian and
 * coordination.MomentArms); this file computes the same quantities another way, so the two
 * agree to rounding (tests/test_compiled.py holds them equal to 1e-9):
 *
 * - Body Jacobians from MuJoCo's motion subspaces (mj_jac's formula): for a DOF d that moves
 *   body b, the angular velocity per unit qdot_d is cdof_d's angular part and the velocity of
 *   the body's centre c_b is cdof_d's linear part + angular x (c_b - the tree's centre of
 *   mass); zero for the DOFs that do not move b.
 * - Moment arms as the power of a unit tension: a segment pulls its start by +u and its end
 *   by -u, so the muscle's rate is l' = -sum over bodies (F_b . v_b + T_b . w_b) with F_b, T_b
 *   the force and torque (about c_b) a unit tension puts on body b (MuscleVAE eq. 20, the
 *   transpose of the LBS map), and A[m, d] = -sum_b (F_b . Jv_b[:, d] + T_b . Jw_b[:, d]),
 *   summed over the few bodies each muscle touches and the DOFs that move them; exactly 0 for
 *   a DOF that moves all of them (a rigid motion of the muscle's whole path).
 * - Contacts: each contact body's 8 box corners, its 4 lowest (a stable sort, as
 *   numpy's argsort(kind="stable")), those below `margin`, each giving 4 rows n + mu t.
 */
#include <string.h>

#include "sinew_muscles.h"

/* The rig's kinematic tree and foot boxes, laid out as engine/compiled.py's _Decision. */
typedef struct {
    int32_t nv, NC;               /* DOFs, contact bodies */
    const int32_t *chain_start;   /* B + 1: first entry of each body in chain, then its length */
    const int32_t *chain;         /* the DOFs that move each body (its ancestors' and its own) */
    const int32_t *contact_body;  /* NC: the bodies whose box corners may touch the floor */
    const double *corner;         /* B x 8 x 3: each body's box corners in its frame */
    double mu;                    /* friction coefficient of the pyramid's edges */
    double *jw, *jv;              /* scratch B x 3 x nv: the body Jacobians (zero off the chain) */
    double *wrench;               /* scratch B x 6: a unit tension's force and torque per body */
    int32_t *touched;             /* scratch B: the bodies a muscle touches, in order */
    int32_t *moves;               /* scratch nv: how many of them each DOF moves */
} SinewDecision;

SINEW_API int sinew_decision_size(void) { return (int)sizeof(SinewDecision); }

/* Jw, Jv of every body at its centre xipos (B x 3) from cdof (nv x 6: angular, linear at the
 * tree's centre of mass com). */
static void body_jacobians(const SinewMuscles *m, const SinewDecision *d, const double *cdof,
                           const double *xipos, const double *com) {
    int nv = d->nv;
    for (int b = 0; b < m->B; b++) {
        double r0 = xipos[3 * b] - com[0], r1 = xipos[3 * b + 1] - com[1], r2 = xipos[3 * b + 2] - com[2];
        double *jw = d->jw + (size_t)3 * nv * b, *jv = d->jv + (size_t)3 * nv * b;
        for (int e = d->chain_start[b]; e < d->chain_start[b + 1]; e++) {
            int k = d->chain[e];
            const double *c = cdof + 6 * k;
            jw[k] = c[0]; jw[nv + k] = c[1]; jw[2 * nv + k] = c[2];
            jv[k] = c[3] + (c[1] * r2 - c[2] * r1);
            jv[nv + k] = c[4] + (c[2] * r0 - c[0] * r2);
            jv[2 * nv + k] = c[5] + (c[0] * r1 - c[1] * r0);
        }
    }
}

/* Adds the pull f (3) on waypoint k to its LBS bodies' wrenches, noting bodies first touched. */
static void pull_waypoint(const SinewMuscles *m, SinewDecision *d, int k, const double *f, int *n_touched) {
    for (int s = 0; s < 2; s++) {
        int slot = 2 * k + s;
        double w = m->wp_weight[slot];
        if (w == 0.0) continue;
        int b = m->wp_body[slot];
        double *W = d->wrench + 6 * b;
        int seen = 0;
        for (int i = 0; i < *n_touched; i++) seen |= d->touched[i] == b;
        if (!seen) {
            d->touched[(*n_touched)++] = b;
            memset(W, 0, 6 * sizeof(double));
        }
        const double *y = m->anchor + 3 * slot;
        double g0 = w * f[0], g1 = w * f[1], g2 = w * f[2];
        W[0] += g0; W[1] += g1; W[2] += g2;
        W[3] += y[1] * g2 - y[2] * g1;
        W[4] += y[2] * g0 - y[0] * g2;
        W[5] += y[0] * g1 - y[1] * g0;
    }
}

/* A (M x nv) from the unit directions seg_u and anchors of the last sinew_waypoints call. */
static void moment_arms(const SinewMuscles *m, SinewDecision *d, double *A) {
    int nv = d->nv;
    for (int j = 0; j < m->M; j++) {
        int n_touched = 0;
        for (int s = m->seg_start[j]; s < m->seg_start[j + 1]; s++) {
            const double *u = m->seg_u + 3 * s;
            double minus[3] = {-u[0], -u[1], -u[2]};
            pull_waypoint(m, d, m->seg_a[s], u, &n_touched);
            pull_waypoint(m, d, m->seg_b[s], minus, &n_touched);
        }
        double *row = A + (size_t)nv * j;
        memset(row, 0, (size_t)nv * sizeof(double));
        for (int i = 0; i < n_touched; i++) {
            int b = d->touched[i];
            const double *W = d->wrench + 6 * b;
            const double *jw = d->jw + (size_t)3 * nv * b, *jv = d->jv + (size_t)3 * nv * b;
            for (int e = d->chain_start[b]; e < d->chain_start[b + 1]; e++) {
                int k = d->chain[e];
                row[k] -= W[0] * jv[k] + W[1] * jv[nv + k] + W[2] * jv[2 * nv + k]
                        + W[3] * jw[k] + W[4] * jw[nv + k] + W[5] * jw[2 * nv + k];
                d->moves[k]++;
            }
        }
        /* A DOF that moves every body the muscle touches moves them as one rigid piece: its
         * moment arm is exactly 0 (the sum above leaves round-off, ~1e-16; an exact zero lets
         * the solve skip it, dual_newton.c) */
        for (int i = 0; i < n_touched; i++) {
            int b = d->touched[i];
            for (int e = d->chain_start[b]; e < d->chain_start[b + 1]; e++) {
                int k = d->chain[e];
                if (d->moves[k] == n_touched) row[k] = 0.0;
            }
        }
        for (int i = 0; i < n_touched; i++) {
            int b = d->touched[i];
            for (int e = d->chain_start[b]; e < d->chain_start[b + 1]; e++) d->moves[d->chain[e]] = 0;
        }
    }
}

/* The edge rows (4 per corner below margin, point-major) into Jc; returns the rows written. */
static int contact_rows(const SinewMuscles *m, const SinewDecision *d, const double *rot, const double *pos,
                        double margin, double *Jc) {
    int nv = d->nv, rows = 0;
    const double mu = d->mu, edge[4][3] = {{mu, 0, 1}, {-mu, 0, 1}, {0, mu, 1}, {0, -mu, 1}};
    for (int c = 0; c < d->NC; c++) {
        int b = d->contact_body[c];
        const double *R = rot + 9 * b, *p = pos + 3 * b;
        double pts[8][3];
        int order[8];
        for (int k = 0; k < 8; k++) {
            const double *x = d->corner + 24 * b + 3 * k;
            for (int i = 0; i < 3; i++) pts[k][i] = R[3 * i] * x[0] + R[3 * i + 1] * x[1] + R[3 * i + 2] * x[2] + p[i];
            int at = k;  /* insertion sort by height, stable */
            while (at > 0 && pts[order[at - 1]][2] > pts[k][2]) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = k;
        }
        const double *jw = d->jw + (size_t)3 * nv * b, *jv = d->jv + (size_t)3 * nv * b;
        for (int n = 0; n < 4; n++) {
            const double *pt = pts[order[n]];
            if (!(pt[2] < margin)) continue;
            double r0 = pt[0] - p[0], r1 = pt[1] - p[1], r2 = pt[2] - p[2];
            double *out = Jc + (size_t)nv * rows;
            memset(out, 0, (size_t)4 * nv * sizeof(double));
            for (int e = d->chain_start[b]; e < d->chain_start[b + 1]; e++) {
                int k = d->chain[e];
                double w0 = jw[k], w1 = jw[nv + k], w2 = jw[2 * nv + k];
                double v[3] = {jv[k] + (w1 * r2 - w2 * r1), jv[nv + k] + (w2 * r0 - w0 * r2),
                               jv[2 * nv + k] + (w0 * r1 - w1 * r0)};
                for (int q = 0; q < 4; q++)
                    out[(size_t)nv * q + k] = edge[q][0] * v[0] + edge[q][1] * v[1] + edge[q][2] * v[2];
            }
            rows += 4;
        }
    }
    return rows;
}

/* in: body rotations (B x 3 x 3), centres, linear and angular velocities (B x 3 each, world
 * frame), as sinew_muscle_step's; cdof (nv x 6), xipos (B x 3) and com (3) from MuJoCo's data
 * at that state. out: per muscle length, rate, f_l f_v and f_PE (4 x M); A (M x nv); Jc
 * (at most 16 NC rows x nv). Returns the contact rows written. */
SINEW_API int sinew_decision_terms(const SinewMuscles *m, SinewDecision *d, const double *in, const double *cdof,
                                   const double *xipos, const double *com, double margin, double *out,
                                   double *A, double *Jc) {
    int B = m->B, M = m->M;
    const double *rot = in, *pos = in + 9 * B;
    sinew_waypoints(m, rot, pos, in + 12 * B, in + 15 * B);
    sinew_lengths(m, out, out + M);
    for (int j = 0; j < M; j++) {
        double lbar = (out[j] / m->l_rest[j] - m->lt[j]) / m->lm[j];
        double vbar = out[M + j] / (m->l_rest[j] * m->lm[j]);
        sinew_hill_factors(lbar, vbar, out + 2 * M + j, out + 3 * M + j);
    }
    body_jacobians(m, d, cdof, xipos, com);
    moment_arms(m, d, A);
    return contact_rows(m, d, rot, pos, margin, Jc);
}
