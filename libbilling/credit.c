/*
 * credit.c - spending credit grants on the invoice's own figures (minor
 * units, as much as the grants can pay together, never beyond the
 * subtotal) and the account balance that invoices below zero leave. The
 * pools it pays are month.c's; the live balance and its exhaustion,
 * which replay months, are balance.c's.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "invoice.h"

int bl_credit_init(bl_credit *c, const billing_catalog *cat, size_t ai)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    size_t n = a->n_grants ? a->n_grants : 1;
    size_t i;

    memset(c, 0, sizeof(*c));
    c->remaining = malloc(n * sizeof(mpz_t));
    c->applied = malloc(n * sizeof(mpz_t));
    c->returned = malloc(n * sizeof(mpz_t));
    if (c->remaining == NULL || c->applied == NULL || c->returned == NULL) {
        free(c->remaining);
        free(c->applied);
        free(c->returned);
        memset(c, 0, sizeof(*c));
        return -1;
    }
    c->n = a->n_grants;
    for (i = 0; i < c->n; i++) {
        mpz_init_set(c->remaining[i], BL_AT(cat->grants, bl_grant, a->grants[i])->amount_minor);
        mpz_init(c->applied[i]);
        mpz_init(c->returned[i]);
    }
    mpz_init(c->returned_total);
    mpz_init(c->balance);
    mpz_init(c->balance_applied);
    mpz_init(c->carried);
    return 0;
}

/* Forget the fee payments recorded so far. */
static void paid_clear(bl_credit *c)
{
    size_t i;
    size_t g;

    for (i = 0; i < c->n_paid; i++) {
        mpz_clear(c->paid[i].pool);
        for (g = 0; g < c->n; g++)
            mpz_clear(c->paid[i].by_grant[g]);
        free(c->paid[i].by_grant);
    }
    c->n_paid = 0;
}

/* A new zeroed record of a fee pool's payments; NULL when out of memory. */
static bl_fee_paid *paid_push(bl_credit *c, int32_t month, size_t epoch)
{
    bl_fee_paid *p;
    size_t cap;
    size_t g;

    if (c->n_paid == c->cap_paid) {
        cap = c->cap_paid ? 2 * c->cap_paid : 8;
        p = realloc(c->paid, cap * sizeof(*p));
        if (p == NULL)
            return NULL;
        c->paid = p;
        c->cap_paid = cap;
    }
    p = &c->paid[c->n_paid];
    p->by_grant = malloc((c->n ? c->n : 1) * sizeof(mpz_t));
    if (p->by_grant == NULL)
        return NULL;
    p->month = month;
    p->epoch = epoch;
    mpz_init(p->pool);
    for (g = 0; g < c->n; g++)
        mpz_init(p->by_grant[g]);
    c->n_paid++;
    return p;
}

void bl_credit_clear(bl_credit *c)
{
    size_t i;

    if (c->remaining == NULL)
        return;
    paid_clear(c);
    free(c->paid);
    for (i = 0; i < c->n; i++) {
        mpz_clear(c->remaining[i]);
        mpz_clear(c->applied[i]);
        mpz_clear(c->returned[i]);
    }
    free(c->remaining);
    free(c->applied);
    free(c->returned);
    mpz_clear(c->returned_total);
    mpz_clear(c->balance);
    mpz_clear(c->balance_applied);
    mpz_clear(c->carried);
    memset(c, 0, sizeof(*c));
}

int bl_credit_copy(bl_credit *dst, const bl_credit *src)
{
    bl_fee_paid *p;
    size_t i;
    size_t g;

    for (i = 0; i < src->n; i++) {
        mpz_set(dst->remaining[i], src->remaining[i]);
        mpz_set(dst->applied[i], src->applied[i]);
        mpz_set(dst->returned[i], src->returned[i]);
    }
    mpz_set(dst->returned_total, src->returned_total);
    mpz_set(dst->balance, src->balance);
    mpz_set(dst->balance_applied, src->balance_applied);
    mpz_set(dst->carried, src->carried);
    paid_clear(dst);
    for (i = 0; i < src->n_paid; i++) {
        p = paid_push(dst, src->paid[i].month, src->paid[i].epoch);
        if (p == NULL)
            return -1;
        mpz_set(p->pool, src->paid[i].pool);
        for (g = 0; g < src->n; g++)
            mpz_set(p->by_grant[g], src->paid[i].by_grant[g]);
    }
    return 0;
}

/* Position of @t among the account's sorted epoch bounds. */
static size_t bound_index(const bl_account *a, billing_time_t t)
{
    /* Bounds < t are bounds <= t - 1: instants are integers within 1900..2200. */
    return bl_upper_bound(a->epochs, a->n_epochs, t - 1);
}

/* ---------------------------------------------------------------------- */
/* Refunds of fees that credit paid                                        */
/* ---------------------------------------------------------------------- */

static const bl_fee_paid *paid_find(const bl_credit *c, int32_t month, size_t epoch)
{
    size_t i;

    for (i = 0; i < c->n_paid; i++) {
        if (c->paid[i].month == month && c->paid[i].epoch == epoch)
            return &c->paid[i];
    }
    return NULL;
}

/* Grant @g's exact share of refund line @l: each part pro rata to what @g paid of its pool. */
static void share_of(const bl_credit *c, const bl_line *l, size_t g, mpq_t out)
{
    const bl_fee_paid *p;
    mpq_t part;
    size_t i;

    mpq_init(part);
    mpq_set_ui(out, 0, 1);
    for (i = 0; i < l->n_sources; i++) {
        p = paid_find(c, l->sources[i].month, l->sources[i].epoch);
        if (p == NULL || mpz_sgn(p->by_grant[g]) == 0)
            continue;
        mpq_set_num(part, p->by_grant[g]);
        mpq_set_den(part, p->pool);
        mpq_canonicalize(part);
        mpq_mul(part, part, l->sources[i].amount);
        mpq_add(out, out, part);
    }
    mpq_clear(part);
}

/*
 * Give back to each grant its share of refund line @l. The running sum of
 * the shares is rounded like the line (as a negative amount, as the line
 * is), so the grants together never get more than the line shows, and all
 * of it when grants paid the whole fee.
 */
static void return_line(const billing_catalog *cat, const bl_line *l, bl_credit *c)
{
    mpq_t sum;
    mpq_t share;
    mpz_t upto;
    mpz_t before;
    size_t g;

    mpq_init(sum);
    mpq_init(share);
    mpz_init(upto);
    mpz_init(before);
    for (g = 0; g < c->n; g++) {
        share_of(c, l, g, share);
        if (mpq_sgn(share) == 0)
            continue;
        mpq_sub(sum, sum, share);
        bl_q_round_minor(upto, sum, cat->digits, cat->rounding);
        mpz_sub(before, before, upto); /* before - upto: this grant's part, >= 0 */
        mpz_add(c->returned[g], c->returned[g], before);
        mpz_add(c->remaining[g], c->remaining[g], before);
        mpz_add(c->returned_total, c->returned_total, before);
        mpz_set(before, upto);
    }
    mpq_clear(sum);
    mpq_clear(share);
    mpz_clear(upto);
    mpz_clear(before);
}

static void return_refunds(const billing_catalog *cat, const bl_month *m, bl_credit *c)
{
    size_t i;

    mpz_set_ui(c->returned_total, 0);
    for (i = 0; i < c->n; i++)
        mpz_set_ui(c->returned[i], 0);
    for (i = 0; i < m->n_lines; i++) {
        if (m->lines[i].n_sources > 0)
            return_line(cat, &m->lines[i], c);
    }
}

/* ---------------------------------------------------------------------- */
/* Allocation: grants to pools, as much as possible, earlier grants first  */
/* ---------------------------------------------------------------------- */

/*
 * A transport problem: grants supply at most their remainder, pools take
 * at most their amount, and a grant reaches only the pools it may pay.
 * Grants are served in application order, each by augmenting paths that
 * may move what earlier grants pay to other pools those grants may pay,
 * never lowering an earlier grant's total. This greedy order over a
 * transversal polymatroid ends with the most credit the pools can take,
 * and with each grant paying as much as the earlier ones leave possible.
 */
typedef struct alloc {
    const bl_account *a;
    const billing_catalog *cat;
    size_t n;            /* grants */
    size_t np;           /* pools */
    mpz_t *flow;         /* [grant * np + pool] */
    mpz_ptr cap;         /* what the grants together may still pay */
    mpz_ptr b;           /* spend_grant's bottleneck */
    size_t *window;      /* per grant: first and last epoch inside its window */
    size_t *via_pool;    /* per grant: the pool it was reached through */
    size_t *via_grant;   /* per pool: the grant it was reached from */
    size_t *queue;       /* grants to visit */
    unsigned char *seen; /* grants then pools */
} alloc;

/*
 * At least @nz initialised GMP values and @bytes of indices in @m's
 * working storage (bl_month's scratch and idx); 0, or -1 when out of
 * memory (what was grown stays, bl_month_clear frees it).
 */
static int month_scratch(bl_month *m, size_t nz, size_t bytes)
{
    mpz_t *z;
    void *p;

    if (m->n_scratch < nz) {
        z = realloc(m->scratch, nz * sizeof(mpz_t));
        if (z == NULL)
            return -1;
        m->scratch = z;
        while (m->n_scratch < nz)
            mpz_init(m->scratch[m->n_scratch++]);
    }
    if (m->idx_size < bytes) {
        p = realloc(m->idx, bytes);
        if (p == NULL)
            return -1;
        m->idx = p;
        m->idx_size = bytes;
    }
    return 0;
}

/*
 * The GMP values bl_credit_apply needs beside the allocation's: the fee
 * pools before credit (np), what is due, what grants paid, apply_balance's
 * temporary.
 */
#define APPLY_VALUES(np) ((np) + 3)
/* All the GMP values of bl_credit_apply and its allocation: the flows, cap and b after those. */
#define APPLY_ALL_VALUES(n, np) (APPLY_VALUES(np) + (n) * (np) + 2)
/* The allocation's indices: window 2n, via_pool n, via_grant np, queue n, then the marks. */
#define ALLOC_INDICES(n, np) (4 * (n) + (np) + 1)
#define ALLOC_BYTES(n, np) (ALLOC_INDICES(n, np) * sizeof(size_t) + (n) + (np) + 1)

/*
 * @due: what the invoice asks for before credit (subtotal plus credit
 * given back). The allocation's storage is @m's (month_scratch), after the
 * APPLY_VALUES the caller takes first; 0, or -1 when out of memory.
 */
static int alloc_init(alloc *s, const billing_catalog *cat, const bl_account *a, bl_month *m,
                      const mpz_t due)
{
    const bl_grant *g;
    size_t ni;
    size_t i;

    memset(s, 0, sizeof(*s));
    s->a = a;
    s->cat = cat;
    s->n = a->n_grants;
    s->np = 2 * m->n_pools;
    ni = ALLOC_INDICES(s->n, s->np);
    if (month_scratch(m, APPLY_ALL_VALUES(s->n, s->np), ALLOC_BYTES(s->n, s->np)) != 0)
        return -1;
    s->flow = m->scratch + APPLY_VALUES(s->np);
    s->cap = s->flow[s->n * s->np];
    s->b = s->flow[s->n * s->np + 1];
    s->window = m->idx;
    s->via_pool = s->window + 2 * s->n;
    s->via_grant = s->via_pool + s->n;
    s->queue = s->via_grant + s->np;
    s->seen = (unsigned char *)(s->window + ni);
    for (i = 0; i < s->n * s->np; i++)
        mpz_set_ui(s->flow[i], 0);
    for (i = 0; i < s->n; i++) {
        g = BL_AT(cat->grants, bl_grant, a->grants[i]);
        /* Epoch e covers [epochs[e-1], epochs[e]); inside the window: e in (gi, xi]. */
        s->window[2 * i] = bound_index(a, g->granted_at) + 1;
        s->window[2 * i + 1] = bound_index(a, g->expires_at);
    }
    mpz_set_ui(s->cap, 0);
    if (mpz_sgn(due) > 0)
        mpz_set(s->cap, due); /* credit never takes an invoice below zero */
    return 0;
}

/* May grant @g pay pool @p (epoch p / 2, usage when p is even)? */
static int may_pay(const alloc *s, size_t g, size_t p)
{
    const bl_grant *gr = BL_AT(s->cat->grants, bl_grant, s->a->grants[g]);
    unsigned kind = p % 2 == 0 ? BILLING_CHARGE_USAGE : BILLING_CHARGE_SUBSCRIPTION;

    return (gr->kinds & kind) && p / 2 >= s->window[2 * g] && p / 2 <= s->window[2 * g + 1];
}

/*
 * Breadth-first search from grant @from for a pool with room, through
 * pools already full and the grants paying them. Returns the pool or
 * BL_NONE; the path is in via_grant / via_pool.
 */
static size_t find_path(alloc *s, const bl_month *m, size_t from)
{
    size_t head = 0;
    size_t tail = 0;
    size_t g;
    size_t h;
    size_t p;

    memset(s->seen, 0, s->n + s->np);
    s->queue[tail++] = from;
    s->seen[from] = 1;
    while (head < tail) {
        g = s->queue[head++];
        for (p = 0; p < s->np; p++) {
            if (s->seen[s->n + p] || !may_pay(s, g, p))
                continue;
            s->seen[s->n + p] = 1;
            s->via_grant[p] = g;
            if (mpz_sgn(m->pools[p]) > 0)
                return p;
            for (h = 0; h < s->n; h++) {
                if (s->seen[h] || mpz_sgn(s->flow[h * s->np + p]) <= 0)
                    continue;
                s->seen[h] = 1;
                s->via_pool[h] = p;
                s->queue[tail++] = h;
            }
        }
    }
    return BL_NONE;
}

/* Push @amount (already the path's bottleneck) from grant @from to pool @end. */
static void augment(alloc *s, bl_month *m, size_t from, size_t end, const mpz_t amount)
{
    size_t p = end;
    size_t g;

    mpz_sub(m->pools[end], m->pools[end], amount);
    mpz_sub(s->cap, s->cap, amount);
    for (;;) {
        g = s->via_grant[p];
        mpz_add(s->flow[g * s->np + p], s->flow[g * s->np + p], amount);
        if (g == from)
            break;
        p = s->via_pool[g];
        mpz_sub(s->flow[g * s->np + p], s->flow[g * s->np + p], amount);
    }
}

/* Spend grant @i as far as it can go; its total lands in @spent. */
static void spend_grant(alloc *s, bl_month *m, size_t i, const mpz_t left, mpz_t spent)
{
    mpz_ptr b = s->b;
    size_t end;
    size_t p;
    size_t g;

    mpz_set_ui(spent, 0);
    for (;;) {
        mpz_sub(b, left, spent);
        if (mpz_cmp(b, s->cap) > 0)
            mpz_set(b, s->cap);
        if (mpz_sgn(b) <= 0)
            break;
        end = find_path(s, m, i);
        if (end == BL_NONE)
            break;
        if (mpz_cmp(b, m->pools[end]) > 0)
            mpz_set(b, m->pools[end]);
        /* Walking back, each earlier grant on the path gives up part of a pool. */
        p = end;
        g = s->via_grant[p];
        while (g != i) {
            p = s->via_pool[g];
            if (mpz_cmp(b, s->flow[g * s->np + p]) > 0)
                mpz_set(b, s->flow[g * s->np + p]);
            g = s->via_grant[p];
        }
        augment(s, m, i, end, b);
        mpz_add(spent, spent, b);
    }
}

/* The account balance pays what grants left of @due; below zero is carried. @left: scratch. */
static void apply_balance(const mpz_t due, bl_credit *c, const mpz_t grants, mpz_ptr left)
{
    mpz_sub(left, due, grants);
    if (mpz_sgn(left) < 0)
        mpz_set_ui(left, 0);
    mpz_set(c->balance_applied, mpz_cmp(c->balance, left) < 0 ? c->balance : left);
    mpz_sub(c->balance, c->balance, c->balance_applied);
    mpz_set_ui(c->carried, 0);
    if (mpz_sgn(due) < 0)
        mpz_neg(c->carried, due);
    mpz_add(c->balance, c->balance, c->carried);
}

/* Record what grants paid of month @m's fee pools (@before: the pools before credit). */
static int record_fees(const alloc *s, const bl_month *m, const mpz_t *before, bl_credit *c)
{
    bl_fee_paid *rec;
    size_t p;
    size_t g;

    for (p = 1; p < s->np; p += 2) {
        if (mpz_cmp(before[p], m->pools[p]) == 0)
            continue; /* no credit on this pool */
        rec = paid_push(c, m->month, p / 2);
        if (rec == NULL)
            return -1;
        mpz_set(rec->pool, before[p]);
        for (g = 0; g < s->n; g++)
            mpz_set(rec->by_grant[g], s->flow[g * s->np + p]);
    }
    return 0;
}

int bl_credit_apply(const billing_catalog *cat, size_t ai, bl_month *m, bl_credit *c)
{
    const bl_account *a = BL_AT(cat->accounts, bl_account, ai);
    alloc s;
    mpz_ptr grants;
    mpz_ptr due;
    mpz_ptr left;
    mpz_t *before;
    size_t np = 2 * m->n_pools;
    size_t i;
    size_t p;

    /* The month's working storage, grown first: nothing moves or is allocated after. */
    if (month_scratch(m, APPLY_ALL_VALUES(a->n_grants, np), ALLOC_BYTES(a->n_grants, np)) != 0)
        return -1;
    before = m->scratch;
    due = m->scratch[np];
    grants = m->scratch[np + 1];
    left = m->scratch[np + 2];
    return_refunds(cat, m, c);
    mpz_add(due, m->subtotal, c->returned_total);
    if (alloc_init(&s, cat, a, m, due) != 0)
        return -1;
    for (p = 1; p < s.np; p += 2) /* fee pools: refunds give back what credit paid of them */
        mpz_set(before[p], m->pools[p]);
    mpz_set_ui(grants, 0);
    for (i = 0; i < c->n; i++)
        spend_grant(&s, m, i, c->remaining[i], c->applied[i]);
    /* Paths move what a grant pays between pools, never its total. */
    for (i = 0; i < c->n; i++) {
        mpz_set_ui(c->applied[i], 0);
        for (p = 0; p < s.np; p++)
            mpz_add(c->applied[i], c->applied[i], s.flow[i * s.np + p]);
        mpz_sub(c->remaining[i], c->remaining[i], c->applied[i]);
        mpz_add(grants, grants, c->applied[i]);
    }
    apply_balance(due, c, grants, left);
    return record_fees(&s, m, (const mpz_t *)before, c);
}
