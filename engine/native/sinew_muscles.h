/* What engine/native's C files share: the rig's muscle layout (engine/compiled.py's ctypes
 * Structure, field for field) and the muscle kinematics both the step (muscle_step.c) and
 * the decision's terms (decision_terms.c) start from. */
#ifndef SINEW_MUSCLES_H
#define SINEW_MUSCLES_H

#include <stdint.h>

#if defined(_WIN32)
#define SINEW_API __declspec(dllexport)
#else
#define SINEW_API __attribute__((visibility("default")))
#endif

#if defined(_WIN32)
#define SINEW_INTERNAL
#else
#define SINEW_INTERNAL __attribute__((visibility("hidden")))
#endif

#define V_MAX 10.0
#define LBAR_GUARD 10.0
#define FLFV_FLOOR 1e-6

/* Everything fixed for a rig, laid out as engine/compiled.py's ctypes Structure. */
typedef struct {
    int32_t B, K, S, M;
    const int32_t *wp_body;   /* K x 2: LBS bodies of each waypoint */
    const double *wp_weight;  /* K x 2: blend weights (0: unused slot) */
    const double *wp_local;   /* K x 2 x 3: anchor in each body's frame */
    const int32_t *seg_a;     /* S: start waypoint of each segment */
    const int32_t *seg_b;     /* S: end waypoint */
    const int32_t *seg_start; /* M + 1: first segment of each muscle, then S */
    const int32_t *body_start; /* B + 1: first entry of each body in body_slot, then its length */
    const int32_t *body_slot; /* waypoint slots 2 k + s with a weight, grouped by body */
    const double *f0, *l_rest, *lt, *lm, *kp, *kd; /* M each */
    double dt, F, R, r, LD, LR; /* time step and effective 3CC-r rates (scale applied) */
    double *wp_pos, *wp_vel;  /* scratch K x 3 each */
    double *seg_u;            /* scratch S x 3: unit segment directions */
    double *wp_force;         /* scratch K x 3 */
    double *anchor;           /* scratch K x 2 x 3: R_i x_i, each anchor's offset from its body */
} SinewMuscles;

/* Stage 1: every waypoint's position and velocity (LBS, MASS eq. 1) into wp_pos, wp_vel, and
 * each anchor's offset from its body R_i x_i into anchor. */
SINEW_INTERNAL void sinew_waypoints(const SinewMuscles *m, const double *rot, const double *pos,
                                    const double *lin, const double *ang);

/* Stage 1: unit segment directions into seg_u, polyline lengths and rates (MuscleVAE eq. 19). */
SINEW_INTERNAL void sinew_lengths(const SinewMuscles *m, double *length, double *rate);

/* Stage 2: f_l f_v and f_PE at normalised length and velocity (eq. 23-25, engine.muscle). */
SINEW_INTERNAL void sinew_hill_factors(double lbar, double vbar, double *flfv, double *fpe);

#endif
