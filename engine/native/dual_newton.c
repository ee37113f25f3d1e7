/* The coordination solve's semismooth Newton method (engine/control/coordination.py,
 * dual_newton and _exact_step) in plain C99, step for step.
 *
 *     min 1/2 sum reg x^2 - pull . x + 1/2 |G x - rhs|^2   over lo <= x <= hi   (reg > 0)
 *
 * The numpy functions are the definition; this file repeats them (the same pieces, the same
 * line search, J updated by the columns that entered or left their box), so the two agree to
 * the solve's tolerance (tests/test_compiled.py). What differs is only where numpy would
 * round differently: the order of the sums in J and of equal breakpoints. G's exact zeros are
 * skipped (it is held by columns, compressed): the tracker's G is ~8 % nonzeros. One call costs what
 * numpy spends in Python overhead alone (the solve was 55 % of a planner rollout step).
 *
 * G is m x n, row-major (rows: the generalised coordinates, 56 for the rig; columns: the
 * muscles, contact edges and root unknowns). lam (m) is the warm start in and the
 * multipliers out, x (n) the minimiser out; *steps the Newton steps taken. Returns 1 when
 * converged (|lam + G x - rhs| <= tol (1 + max|rhs|)), 0 when not (the caller falls back to
 * another solver), -1 when out of memory.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#define SINEW_API __declspec(dllexport)
#else
#define SINEW_API __attribute__((visibility("default")))
#endif

/* sum a[j] b[j] in four interleaved partial sums (independent adds keep the pipeline full) */
static double dot(int n, const double *a, const double *b) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += a[j] * b[j];
        s1 += a[j + 1] * b[j + 1];
        s2 += a[j + 2] * b[j + 2];
        s3 += a[j + 3] * b[j + 3];
    }
    for (; j < n; j++) s0 += a[j] * b[j];
    return (s0 + s1) + (s2 + s3);
}

static double clip(double y, double lo, double hi) { /* np.minimum(np.maximum(y, lo), hi) */
    double v = y < lo ? lo : y;
    return v > hi ? hi : v;
}

/* -1 / 0 / +1: clipped low, free, clipped high (low wins where lo = hi) */
static int8_t piece(double y, double lo, double hi) { return y <= lo ? -1 : (y >= hi ? 1 : 0); }

/* G's nonzeros by column (compressed sparse columns, rows ascending): the moment arms are
 * sparse (a muscle moves only the few DOFs between the bodies it spans, ~4 of 56) and so
 * are the contact rows (the foot's chain), so the products and J's updates visit only
 * these. Exact zeros only: skipping them changes no sum. */
typedef struct {
    int *start; /* n + 1 */
    int *row;
    double *val;
} Columns;

static void compress(int m, int n, const double *G, Columns *c) {
    int *start = c->start;
    memset(start, 0, (size_t)(n + 1) * sizeof(int));
    for (int i = 0; i < m; i++) /* counts, shifted by one */
        for (int j = 0; j < n; j++) start[j + 1] += G[(size_t)i * n + j] != 0.0;
    for (int j = 0; j < n; j++) start[j + 1] += start[j];
    for (int i = 0; i < m; i++) /* row by row: each column's rows come out ascending */
        for (int j = 0; j < n; j++) {
            double g = G[(size_t)i * n + j];
            if (g == 0.0) continue;
            int p = start[j]++;
            c->row[p] = i;
            c->val[p] = g;
        }
    for (int j = n; j > 0; j--) start[j] = start[j - 1]; /* the fill advanced each start to the next */
    start[0] = 0;
}

/* The same columns from G^T (n x m row-major: G's columns one after another), in one pass. */
static void compress_columns(int m, int n, const double *Gt, Columns *c) {
    int p = 0;
    for (int j = 0; j < n; j++) {
        c->start[j] = p;
        for (int i = 0; i < m; i++) {
            double g = Gt[(size_t)j * m + i];
            if (g == 0.0) continue;
            c->row[p] = i;
            c->val[p++] = g;
        }
    }
    c->start[n] = p;
}

/* out = G^T v */
static void gt_times(int n, const Columns *c, const double *v, double *out) {
    for (int j = 0; j < n; j++) {
        double s = 0.0;
        for (int p = c->start[j]; p < c->start[j + 1]; p++) s += c->val[p] * v[c->row[p]];
        out[j] = s;
    }
}

/* y = (pull + G^T lam) / reg, x = clip(y), r = G x - rhs */
static void primal(int m, int n, const Columns *c, const double *rhs, const double *reg, const double *lo,
                   const double *hi, const double *pull, const double *lam, double *y, double *x, double *r) {
    gt_times(n, c, lam, y);
    for (int i = 0; i < m; i++) r[i] = -rhs[i];
    for (int j = 0; j < n; j++) {
        y[j] = (pull[j] + y[j]) / reg[j];
        double xj = x[j] = clip(y[j], lo[j], hi[j]);
        for (int p = c->start[j]; p < c->start[j + 1]; p++) r[c->row[p]] += c->val[p] * xj;
    }
}

/* J += sum_j G[:, j] G[:, j]^T coef[j] over the listed columns, lower triangle and diagonal
 * (the Cholesky reads only those): one sparse rank-1 update per column. */
static void add_columns(int m, const Columns *restrict c, const double *restrict coef, const int *restrict cols,
                        int ncols, double *restrict J) {
    for (int q = 0; q < ncols; q++) {
        int j = cols[q], p0 = c->start[j], p1 = c->start[j + 1];
        for (int a = p0; a < p1; a++) {
            double ga = c->val[a] * coef[j];
            double *restrict Ji = J + (size_t)c->row[a] * m;
            for (int b = p0; b <= a; b++) Ji[c->row[b]] += ga * c->val[b];
        }
    }
}

/* J^-1 F by Cholesky on J's lower triangle (J is symmetric and >= I), right-looking so
 * that the inner loop runs along a row; L (lower triangle) overwrites work. Returns 0 when
 * round-off broke the factorisation (then Gaussian elimination, as numpy falls back to
 * np.linalg.solve). */
static int spd_solve(int m, const double *restrict J, const double *restrict F, double *restrict L,
                     double *restrict out) {
    for (int i = 0; i < m; i++) memcpy(L + (size_t)i * m, J + (size_t)i * m, (size_t)(i + 1) * sizeof(double));
    double *restrict col = out; /* column k of L below the diagonal, contiguous (out is free until the solves) */
    for (int k = 0; k < m; k++) {
        double d = L[(size_t)k * m + k];
        if (!(d > 0.0)) return 0;
        d = sqrt(d);
        L[(size_t)k * m + k] = d;
        for (int i = k + 1; i < m; i++) col[i] = L[(size_t)i * m + k] /= d;
        for (int i = k + 1; i < m; i++) {
            double lik = col[i];
            double *restrict Li = L + (size_t)i * m;
            for (int j = k + 1; j <= i; j++) Li[j] -= lik * col[j];
        }
    }
    for (int i = 0; i < m; i++) /* L z = F */
        out[i] = (F[i] - dot(i, L + (size_t)i * m, out)) / L[(size_t)i * m + i];
    for (int i = m - 1; i >= 0; i--) { /* L^T out = z */
        double s = out[i];
        for (int p = i + 1; p < m; p++) s -= L[(size_t)p * m + i] * out[p];
        out[i] = s / L[(size_t)i * m + i];
    }
    return 1;
}

static void lu_solve(int m, const double *J, const double *F, double *A, double *out) {
    for (int i = 0; i < m; i++) /* the full symmetric matrix from its lower triangle */
        for (int k = 0; k < m; k++) A[(size_t)i * m + k] = k <= i ? J[(size_t)i * m + k] : J[(size_t)k * m + i];
    memcpy(out, F, (size_t)m * sizeof(double));
    for (int c = 0; c < m; c++) {
        int p = c;
        for (int i = c + 1; i < m; i++)
            if (fabs(A[(size_t)i * m + c]) > fabs(A[(size_t)p * m + c])) p = i;
        if (p != c) {
            for (int k = 0; k < m; k++) {
                double t = A[(size_t)c * m + k];
                A[(size_t)c * m + k] = A[(size_t)p * m + k];
                A[(size_t)p * m + k] = t;
            }
            double t = out[c];
            out[c] = out[p];
            out[p] = t;
        }
        for (int i = c + 1; i < m; i++) {
            double f = A[(size_t)i * m + c] / A[(size_t)c * m + c];
            for (int k = c; k < m; k++) A[(size_t)i * m + k] -= f * A[(size_t)c * m + k];
            out[i] -= f * out[c];
        }
    }
    for (int i = m - 1; i >= 0; i--) {
        double s = out[i];
        for (int k = i + 1; k < m; k++) s -= A[(size_t)i * m + k] * out[k];
        out[i] = s / A[(size_t)i * m + i];
    }
}

typedef struct {
    double t, ds;
} Breakpoint;

/* A binary min-heap on t: the line search takes breakpoints in time order only until c
 * crosses 0, usually after a few of them, so a full sort would be wasted. */
static void sift_down(Breakpoint *h, int n, int i) {
    Breakpoint v = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1].t < h[c].t) c++;
        if (!(h[c].t < v.t)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

static Breakpoint pop(Breakpoint *h, int *n) {
    Breakpoint top = h[0];
    h[0] = h[--*n];
    if (*n) sift_down(h, *n, 0);
    return top;
}

/* _exact_step: the t > 0 that maximises the dual along lam + t d, walking the breakpoints
 * of the piecewise linear, increasing c(t) (coordination.py). */
static double exact_step(int m, int n, const double *d, const double *F, const double *y, const double *w,
                         const double *b, const double *lo, const double *hi, Breakpoint *ev) {
    double c0 = 0.0, slope0 = 0.0;
    for (int i = 0; i < m; i++) {
        c0 += d[i] * F[i];
        slope0 += d[i] * d[i];
    }
    int ne = 0;
    for (int j = 0; j < n; j++) {
        if (b[j] == 0.0) continue; /* x_j does not move: no breakpoint, no slope */
        double ta = (lo[j] - y[j]) / b[j], tb = (hi[j] - y[j]) / b[j];
        double t_in = ta < tb ? ta : tb, t_out = ta < tb ? tb : ta, s = w[j] * b[j];
        if (t_in <= 0.0 && t_out > 0.0) slope0 += s;
        if (t_in > 0.0 && t_in < INFINITY) ev[ne++] = (Breakpoint){t_in, s};
        if (t_out > 0.0 && t_out < INFINITY) ev[ne++] = (Breakpoint){t_out, -s};
    }
    if (c0 > 0.0) return 0.0;
    for (int i = ne / 2 - 1; i >= 0; i--) sift_down(ev, ne, i);
    double knot = 0.0, c = c0, slope = slope0;
    while (ne) { /* c at the next knot; stop at the last knot with c <= 0 */
        double c_next = c + slope * (ev[0].t - knot);
        if (c_next > 0.0) break;
        Breakpoint e = pop(ev, &ne);
        knot = e.t;
        c = c_next;
        slope += e.ds;
    }
    return slope > 0.0 ? knot - c / slope : knot;
}

/* F = lam + r, the dual's gradient negated; returns max |F_i| (NaN if any is) */
static double residual(int m, const double *lam, const double *r, double *F) {
    double v = 0.0;
    for (int i = 0; i < m; i++) {
        F[i] = lam[i] + r[i];
        double s = fabs(F[i]);
        if (s > v || s != s) v = s;
    }
    return v;
}

/* G (m x n row-major), or G^T (n x m row-major) where by_columns */
static int newton(int m, int n, const double *G, int by_columns, const double *rhs, const double *reg,
                  const double *lo, const double *hi, const double *pull, double tol, int max_iter, double *lam,
                  double *x, int *steps) {
    size_t nn = (size_t)n, mm = (size_t)m;
    double *buf = malloc((5 * nn + 4 * mm + 2 * mm * mm + nn * mm) * sizeof(double));
    Breakpoint *ev = malloc(2 * nn * sizeof(Breakpoint) + 1);
    int *cols = malloc((2 * nn + 1 + nn * mm) * sizeof(int));
    int8_t *s = malloc(2 * nn + 1);
    if (!buf || !ev || !cols || !s) {
        free(buf), free(ev), free(cols), free(s);
        return -1;
    }
    Columns gc = {cols + nn, cols + 2 * nn + 1, NULL};
    double *y = buf, *w = y + nn, *b = w + nn, *yn = b + nn, *coef = yn + nn;
    double *r = coef + nn, *F = r + mm, *step = F + mm, *rhs_neg = step + mm, *J = rhs_neg + mm, *L = J + mm * mm;
    gc.val = L + mm * mm; /* G's nonzeros by column */
    if (by_columns)
        compress_columns(m, n, G, &gc);
    else
        compress(m, n, G, &gc);
    int8_t *in_J = s + nn; /* 1 where column j is in J (its x_j was free) */
    double scale = 1.0;
    for (int i = 0; i < m; i++)
        if (1.0 + fabs(rhs[i]) > scale) scale = 1.0 + fabs(rhs[i]);
    int have_J = 0, result = -2;
    primal(m, n, &gc, rhs, reg, lo, hi, pull, lam, y, x, r);
    for (int k = 0; k < max_iter; k++) {
        *steps = k;
        if (residual(m, lam, r, F) <= tol * scale) {
            result = 1;
            break;
        }
        int nfree = 0, nchanged = 0;
        for (int j = 0; j < n; j++) {
            s[j] = piece(y[j], lo[j], hi[j]);
            nfree += s[j] == 0;
            nchanged += have_J && ((s[j] == 0) != in_J[j]);
        }
        int ncols = 0;
        if (!have_J || 2 * nchanged > nfree) { /* J = I + G_f diag(1/reg_f) G_f^T */
            memset(J, 0, mm * mm * sizeof(double));
            for (int i = 0; i < m; i++) J[(size_t)i * m + i] = 1.0;
            for (int j = 0; j < n; j++)
                if (s[j] == 0) {
                    coef[j] = 1.0 / reg[j];
                    cols[ncols++] = j;
                }
        } else { /* a few x_j entered or left their box: J changes by their columns only */
            for (int j = 0; j < n; j++)
                if ((s[j] == 0) != in_J[j]) {
                    coef[j] = (s[j] == 0 ? 1.0 : -1.0) / reg[j];
                    cols[ncols++] = j;
                }
        }
        if (ncols) add_columns(m, &gc, coef, cols, ncols, J);
        have_J = 1;
        for (int j = 0; j < n; j++) in_J[j] = s[j] == 0;
        for (int i = 0; i < m; i++) rhs_neg[i] = -F[i];
        if (!spd_solve(m, J, rhs_neg, L, step)) lu_solve(m, J, rhs_neg, L, step);
        gt_times(n, &gc, step, w);
        int same = 1;
        for (int j = 0; j < n; j++) {
            b[j] = w[j] / reg[j];
            yn[j] = y[j] + b[j];
            same &= piece(yn[j], lo[j], hi[j]) == s[j];
        }
        if (same) { /* every x_j stayed on its piece: F was linear along the step, which lands on F = 0 */
            *steps = k + 1;
            for (int j = 0; j < n; j++) x[j] = clip(yn[j], lo[j], hi[j]);
            for (int i = 0; i < m; i++) lam[i] += step[i];
            result = 1;
            break;
        }
        double t = exact_step(m, n, step, F, y, w, b, lo, hi, ev);
        if (!(t > 0.0)) break; /* no progress along the step: round-off */
        for (int i = 0; i < m; i++) lam[i] += t * step[i];
        primal(m, n, &gc, rhs, reg, lo, hi, pull, lam, y, x, r);
    }
    if (result == -2) result = residual(m, lam, r, F) <= tol * scale;
    free(buf), free(ev), free(cols), free(s);
    return result;
}

SINEW_API int sinew_dual_newton(int m, int n, const double *G, const double *rhs, const double *reg,
                                const double *lo, const double *hi, const double *pull, double tol,
                                int max_iter, double *lam, double *x, int *steps) {
    return newton(m, n, G, 0, rhs, reg, lo, hi, pull, tol, max_iter, lam, x, steps);
}

/* The same solve with G given by its columns: Gt = G^T, n x m row-major (the tracker assembles
 * it so: a muscle's column of G is its row of moment arms times its force per activation). */
SINEW_API int sinew_dual_newton_columns(int m, int n, const double *Gt, const double *rhs, const double *reg,
                                        const double *lo, const double *hi, const double *pull, double tol,
                                        int max_iter, double *lam, double *x, int *steps) {
    return newton(m, n, Gt, 1, rhs, reg, lo, hi, pull, tol, max_iter, lam, x, steps);
}
