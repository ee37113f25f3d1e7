/* Sinew's compiled muscle step: DESIGN.md "One physics step", stages 1-6, in plain C99.
 *
 * The numpy functions (engine/muscle.py, engine/fatigue.py, engine/muscle_step.py) are the
 * definition; this file repeats their formulas (the Hill and 3CC-r ones operation for
 * operation, the sums over waypoints in another order), so the two agree to rounding
 * (tests/test_compiled.py holds them equal to 1e-9). Build with tools/build_native.py,
 * which passes -ffp-contract=off: a fused multiply-add would round differently from numpy.
 *
 * One call moves every waypoint (LBS, MASS eq. 1) and its velocity, sums polyline lengths
 * and rates (MuscleVAE eq. 19), evaluates the Hill curves (eq. 22-25) and the muscle-space
 * PD law (eq. 4, 5, 11), clips the activation to the 3CC-r bounds (eq. 34-36), advances
 * M_A, M_R, M_F (eq. 26, 27, 37) and carries the tensions back to the bodies through the
 * transpose of the LBS map (eq. 20).
 */
#include <math.h>
#include <string.h>

#include "sinew_muscles.h"

#ifndef SINEW_SOURCE_HASH
#define SINEW_SOURCE_HASH "unknown"
#endif

SINEW_API const char *sinew_source_hash(void) { return SINEW_SOURCE_HASH; }

SINEW_API int sinew_abi_version(void) { return 4; } /* bump when a call or a struct changes (2: sinew_dual_newton, 3: sinew_decision_terms, 4: sinew_dual_newton_columns) */

SINEW_API int sinew_struct_size(void) { return (int)sizeof(SinewMuscles); }

static double max0(double x, double lo) { return x < lo ? lo : x; } /* np.maximum, NaN kept */
static double min0(double x, double hi) { return x > hi ? hi : x; } /* np.minimum, NaN kept */

/* Stage 1: waypoints p = sum_i w_i (R_i x_i + t_i), dp/dt = sum_i w_i (v_i + w_i x R_i x_i). */
void sinew_waypoints(const SinewMuscles *m, const double *rot, const double *pos,
                     const double *lin, const double *ang) {
    for (int k = 0; k < m->K; k++) {
        double p[3] = {0, 0, 0}, v[3] = {0, 0, 0};
        for (int s = 0; s < 2; s++) {
            double w = m->wp_weight[2 * k + s];
            if (w == 0.0) continue;
            int b = m->wp_body[2 * k + s];
            const double *R = rot + 9 * b, *x = m->wp_local + 6 * k + 3 * s, *o = ang + 3 * b;
            double y[3];
            for (int i = 0; i < 3; i++) y[i] = R[3 * i] * x[0] + R[3 * i + 1] * x[1] + R[3 * i + 2] * x[2];
            memcpy(m->anchor + 6 * k + 3 * s, y, sizeof y);
            double c[3] = {o[1] * y[2] - o[2] * y[1], o[2] * y[0] - o[0] * y[2], o[0] * y[1] - o[1] * y[0]};
            for (int i = 0; i < 3; i++) {
                p[i] += w * (y[i] + pos[3 * b + i]);
                v[i] += w * (c[i] + lin[3 * b + i]);
            }
        }
        memcpy(m->wp_pos + 3 * k, p, sizeof p);
        memcpy(m->wp_vel + 3 * k, v, sizeof v);
    }
}

/* Stage 1: unit directions, polyline lengths and their rates sum_s u_s . (v_b - v_a). */
void sinew_lengths(const SinewMuscles *m, double *length, double *rate) {
    for (int j = 0; j < m->M; j++) {
        double l = 0.0, ld = 0.0;
        for (int s = m->seg_start[j]; s < m->seg_start[j + 1]; s++) {
            const double *pa = m->wp_pos + 3 * m->seg_a[s], *pb = m->wp_pos + 3 * m->seg_b[s];
            const double *va = m->wp_vel + 3 * m->seg_a[s], *vb = m->wp_vel + 3 * m->seg_b[s];
            double d0 = pb[0] - pa[0], d1 = pb[1] - pa[1], d2 = pb[2] - pa[2];
            double n = sqrt(d0 * d0 + d1 * d1 + d2 * d2);
            double inv = 1.0 / n, u0 = d0 * inv, u1 = d1 * inv, u2 = d2 * inv;
            double *u = m->seg_u + 3 * s;
            u[0] = u0; u[1] = u1; u[2] = u2;
            l += n;
            ld += u0 * (vb[0] - va[0]) + u1 * (vb[1] - va[1]) + u2 * (vb[2] - va[2]);
        }
        length[j] = l;
        rate[j] = ld;
    }
}

/* Stage 2: f_l f_v and f_PE at normalised length and velocity (eq. 23-25, engine.muscle). */
void sinew_hill_factors(double lbar, double vbar, double *flfv, double *fpe) {
    double e = lbar - 1.0;
    double fl = exp(-(e * e) / 0.5);
    double vp = vbar > 0 ? vbar : 0.0 * vbar, vn = vbar > 0 ? 0.0 * vbar : vbar;
    double lengthening = 1.5 + 0.5 * (vp - V_MAX) / (37.8 * vp + V_MAX);
    double shortening = max0((-V_MAX - vn) / (-V_MAX + 5.0 * vn), 0.0);
    double fv = vbar > 0 ? lengthening : shortening;
    double stretch = min0(max0(lbar, 1.0), LBAR_GUARD) - 1.0;
    *flfv = fl * fv;
    *fpe = stretch == 0.0 ? 0.0 : (exp(4.0 * stretch / 0.6) - 1.0) / (exp(4.0) - 1.0); /* exp(0) - 1 = 0 */
}

/* Stages 2-5 for muscle j: Hill, the PD activation (or the wanted one), the 3CC-r clip and
 * the compartment update (engine.fatigue.step_with_activation). Writes out[j + c M] for
 * c = length, rate (already there), activation, force, MA, MR, MF. */
static void muscle(const SinewMuscles *m, int j, double command, int is_activation,
                   double MA, double MR, double MF, double *out) {
    int M = m->M;
    double l = out[j], ld = out[M + j];
    double lbar = (l / m->l_rest[j] - m->lt[j]) / m->lm[j];
    double vbar = ld / (m->l_rest[j] * m->lm[j]);
    double flfv, fpe;
    sinew_hill_factors(lbar, vbar, &flfv, &fpe);
    double wanted = command;
    if (!is_activation) {
        double target = (command + 1.0) * m->l_rest[j];
        double f_pd = max0(m->kp[j] * (l - target) + m->kd[j] * ld, 0.0);
        wanted = (f_pd / m->f0[j] - fpe) / max0(flfv, FLFV_FLOOR);
    }
    double dt = m->dt, F = m->F, K = 1.0 - dt * F;
    double lb = max0(K * MA - dt * m->LR * MA, 0.0);
    double ub = min0(K * MA + dt * m->LD * MR, 1.0);
    double alpha = min0(max0(wanted, lb), ub);
    double C = (alpha - (1.0 - dt * F) * MA) / dt;
    int demanding = (C > 0) || (wanted > ub);
    double Rr = demanding ? m->R + 0.0 * m->r : m->r * m->R;
    out[2 * M + j] = alpha;
    out[3 * M + j] = m->f0[j] * (alpha * flfv + fpe);
    out[4 * M + j] = alpha;
    out[5 * M + j] = MR + dt * (-C + Rr * MF);
    out[6 * M + j] = MF + dt * (F * MA - Rr * MF);
}

/* Stage 6: each segment pulls its start towards its end (+u f) and its end back (-u f); a
 * waypoint's force is split over its LBS bodies by weight (the transpose of the LBS map);
 * per body the force sum and the torque about its origin, sum_i w_i (R_i x_i) x f. */
static void wrenches(const SinewMuscles *m, const double *force, double *wrench) {
    int B = m->B;
    double *fk = m->wp_force;
    memset(fk, 0, sizeof(double) * 3 * m->K);
    for (int j = 0; j < m->M; j++) {
        for (int s = m->seg_start[j]; s < m->seg_start[j + 1]; s++) {
            const double *u = m->seg_u + 3 * s;
            double *fa = fk + 3 * m->seg_a[s], *fb = fk + 3 * m->seg_b[s];
            for (int i = 0; i < 3; i++) {
                double p = u[i] * force[j];
                fa[i] += p;
                fb[i] -= p;
            }
        }
    }
    for (int b = 0; b < B; b++) {
        double F0 = 0, F1 = 0, F2 = 0, T0 = 0, T1 = 0, T2 = 0;
        for (int e = m->body_start[b]; e < m->body_start[b + 1]; e++) {
            int slot = m->body_slot[e], k = slot / 2;
            double w = m->wp_weight[slot];
            const double *f = fk + 3 * k, *y = m->anchor + 3 * slot;
            double g0 = w * f[0], g1 = w * f[1], g2 = w * f[2];
            F0 += g0; F1 += g1; F2 += g2;
            T0 += y[1] * g2 - y[2] * g1;
            T1 += y[2] * g0 - y[0] * g2;
            T2 += y[0] * g1 - y[1] * g0;
        }
        double *bf = wrench + 3 * b, *bt = wrench + 3 * B + 3 * b;
        bf[0] = F0; bf[1] = F1; bf[2] = F2;
        bt[0] = T0; bt[1] = T1; bt[2] = T2;
    }
}

/* The whole step. in: body rotations (B x 3 x 3), positions, linear and angular velocities
 * (B x 3 each; world frame, at each body's origin), then per muscle the command (PD action
 * a of eq. 11 or, with is_activation, the wanted activation) and M_A, M_R, M_F.
 * out: per muscle length, rate, activation, force, M_A, M_R, M_F (7 x M), then per body
 * force and torque about its origin (2 x B x 3). */
SINEW_API void sinew_muscle_step(const SinewMuscles *m, const double *in, int is_activation, double *out) {
    int B = m->B, M = m->M;
    const double *rot = in, *pos = in + 9 * B, *lin = in + 12 * B, *ang = in + 15 * B;
    const double *command = in + 18 * B, *MA = command + M, *MR = MA + M, *MF = MR + M;
    sinew_waypoints(m, rot, pos, lin, ang);
    sinew_lengths(m, out, out + M);
    for (int j = 0; j < M; j++) muscle(m, j, command[j], is_activation, MA[j], MR[j], MF[j], out);
    wrenches(m, out + 3 * M, out + 7 * M);
}
