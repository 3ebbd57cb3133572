/*
 * document.c - the model of a stored invoice every writer writes. See
 * document.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "document.h"
#include "numfmt.h"

#define KEY(k, f)                       \
    {                                   \
        k, offsetof(bs_invoice_head, f) \
    }

/* Every header field, in the order JSON and `invoice show` write them. */
const doc_key doc_header_keys[] = {
    KEY("id", id),
    KEY("number", number),
    KEY("account", account),
    KEY("kind", kind),
    KEY("period", period),
    KEY("status", status),
    KEY("currency", currency),
    KEY("subtotal", subtotal),
    KEY("credits", credits),
    KEY("tax", tax),
    KEY("total", total),
    KEY("series", series),
    KEY("corrects", corrects),
    KEY("period_start", period_start),
    KEY("period_end", period_end),
    KEY("tax_rate", tax_rate),
    KEY("time_zone", time_zone),
    KEY("finalized_at", finalized_at),
    KEY("void_reason", void_reason),
    KEY("account_name", account_name),
    KEY("credit_returned", credit_returned),
    KEY("account_credit", account_credit),
    KEY("carried", carried),
    KEY("account_credit_left", account_credit_left),
    KEY("before_credit", before_credit),
    KEY("taxable", taxable),
    KEY("credit_remaining", credit_remaining),
    KEY("account_credit_refunded", account_credit_refunded),
    KEY("refund_tax", refund_tax),
    KEY("refunded_total", refunded_total),
    KEY("refund_method", refund_method),
    KEY("refund_reason", refund_reason),
    KEY("refund_reference", refund_reference),
};
const size_t doc_n_header_keys = sizeof(doc_header_keys) / sizeof(doc_header_keys[0]);

const char *doc_key_value(const doc_invoice *d, const doc_key *k)
{
    const char *v;

    memcpy(&v, (const char *)DOC_HEAD(d) + k->off, sizeof(v));
    return v != NULL ? v : "";
}

const char *doc_field(const doc_invoice *d, const char *key)
{
    size_t i;

    for (i = 0; i < doc_n_header_keys; i++) {
        if (strcmp(doc_header_keys[i].key, key) == 0)
            return doc_key_value(d, &doc_header_keys[i]);
    }
    return "";
}

/* ---------------------------------------------------------------------- */
/* Loading                                                                 */
/* ---------------------------------------------------------------------- */

/* The seller of @d's price book into @d (none without a book or an issuer row). */
static bs_status issuer_load(bs_conn *c, doc_invoice *d, bs_error *err)
{
    d->issuer = NULL;
    if (DOC_HEAD(d)->book[0] == '\0')
        return BS_OK;
    return bs_issuer_get(c, DOC_HEAD(d)->book, &d->issuer, err);
}

bs_status doc_load(bs_conn *c, int64_t id, doc_invoice *d, bs_error *err)
{
    bs_status st;

    memset(d, 0, sizeof(*d));
    st = bs_invoice_read(c, id, &d->rows, err);
    if (st == BS_OK)
        st = issuer_load(c, d, err);
    if (st != BS_OK)
        doc_free(d);
    return st;
}

/* A copy of @src (an issuer of the same book read for an earlier invoice), or NULL. */
static bs_issuer *issuer_copy(const bs_issuer *src)
{
    const char *const *f = (const char *const *)src;
    size_t n = sizeof(*src) / sizeof(const char *);
    size_t size = sizeof(*src);
    bs_issuer *copy;
    char *arena;
    size_t i;

    for (i = 0; i < n; i++)
        size += strlen(f[i]) + 1;
    copy = malloc(size);
    if (copy == NULL)
        return NULL;
    arena = (char *)(copy + 1);
    for (i = 0; i < n; i++) {
        size_t len = strlen(f[i]) + 1;
        memcpy(arena, f[i], len);
        ((const char **)copy)[i] = arena;
        arena += len;
    }
    return copy;
}

bs_status doc_load_set(bs_conn *c, const int64_t *ids, size_t n, doc_invoice *d, bs_error *err)
{
    bs_invoice_rows *rows[BS_INVOICE_SET_MAX];
    bs_status st;
    size_t i;

    memset(d, 0, n * sizeof(*d));
    if (n > BS_INVOICE_SET_MAX)
        return bs_error_set(err, BS_ERR_INVALID, "%zu invoices in one read, at most %d", n,
                            BS_INVOICE_SET_MAX);
    st = bs_invoice_read_set(c, ids, n, rows, err);
    for (i = 0; st == BS_OK && i < n; i++)
        d[i].rows = rows[i];
    for (i = 0; st == BS_OK && i < n; i++) {
        /* The invoices of a chunk mostly share a book: read its seller once. */
        if (i > 0 && strcmp(DOC_HEAD(&d[i])->book, DOC_HEAD(&d[i - 1])->book) == 0) {
            if (d[i - 1].issuer != NULL && (d[i].issuer = issuer_copy(d[i - 1].issuer)) == NULL)
                st = bs_error_set(err, BS_ERR_NOMEM, "out of memory");
        } else {
            st = issuer_load(c, &d[i], err);
        }
    }
    for (i = 0; st != BS_OK && i < n; i++)
        doc_free(&d[i]);
    return st;
}

void doc_free(doc_invoice *d)
{
    bs_invoice_rows_free(d->rows);
    free(d->issuer);
    memset(d, 0, sizeof(*d));
}

/* ---------------------------------------------------------------------- */
/* Totals                                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The invoice's totals in the order a customer reconciles them: what the
 * lines and refunds come to, the credit taken off, then tax and the amount
 * due (doc/operations.md, "Credit on invoices"). Rows whose zero cannot
 * confuse (returned, account credit, carried) are left out when zero;
 * what is taken off is printed with a minus.
 */
const doc_total doc_totals[] = {
    {"subtotal", "Subtotal (lines)", "小计（明细）", 0, 0},
    {"credit_returned", "Credit returned to grants (refunds)", "退回赠金（退款）", 1, 0},
    {"before_credit", "Total before credit", "抵扣前合计", 0, 0},
    {"credits", "Credit applied", "赠金抵扣", 0, 1},
    {"account_credit", "Account credit applied", "账户余额抵扣", 1, 1},
    {"carried", "Carried to account credit", "转入账户余额", 1, 0},
    {"taxable", "Taxable amount", "应税金额", 0, 0},
    {"tax", "Tax", "税额", 0, 0},
    {"total", "Amount due", "应付金额", 0, 0},
    /* A credit note of account credit refunded out of band (billing.refund_invoice). */
    {"account_credit_refunded", "Account credit refunded", "已退账户余额", 1, 0},
    {"refund_tax", "Tax on it refunded", "已退税额", 1, 0},
    {"refunded_total", "Refunded to the payment method", "退回支付方式", 1, 0},
};
const size_t doc_n_totals = sizeof(doc_totals) / sizeof(doc_totals[0]);

int doc_total_shown(const doc_invoice *d, const doc_total *t)
{
    const char *v = doc_field(d, t->key);

    return !t->hide_zero || strspn(v, "-0.") != strlen(v);
}

const char *doc_total_label(const doc_invoice *d, const doc_total *t, char *buf, size_t size)
{
    int zh = doc_language(d) == DOC_ZH;
    char pct[64];

    if (strcmp(t->key, "tax") == 0 && doc_field(d, "tax_rate")[0] != '\0' &&
        numfmt_percent(doc_field(d, "tax_rate"), pct, sizeof(pct)) == 0) {
        snprintf(buf, size, zh ? "税额（税率 %s）" : "Tax at %s", pct);
        return buf;
    }
    if (strcmp(t->key, "total") != 0)
        return zh ? t->label_zh : t->label;
    if (strcmp(doc_field(d, "kind"), "credit_note") == 0)
        return zh ? "贷记合计" : "Total credited";
    if (strcmp(doc_field(d, "status"), "void") == 0)
        return zh ? "应付金额（已作废：无需支付）" : "Amount due (void: nothing to pay)";
    return zh ? t->label_zh : t->label;
}

const char *doc_total_text(const doc_invoice *d, const doc_total *t, char *buf, size_t size)
{
    const char *v = doc_field(d, t->key);

    if (!t->taken_off || strspn(v, "0.") == strlen(v))
        return v;
    snprintf(buf, size, "-%s", v);
    return buf;
}

/* ---------------------------------------------------------------------- */
/* Labels, descriptions, quantities                                        */
/* ---------------------------------------------------------------------- */

doc_lang doc_language(const doc_invoice *d)
{
    return strcmp(DOC_HEAD(d)->customer.language, "zh-Hans") == 0 ? DOC_ZH : DOC_EN;
}

/* The fixed texts, by doc_text_id: English, Simplified Chinese. */
static const char *const texts[DOC_T_COUNT][2] = {
    [DOC_T_INVOICE] = {"INVOICE", "发票"},
    [DOC_T_CREDIT_NOTE] = {"CREDIT NOTE", "贷记单"},
    [DOC_T_DRAFT] = {"DRAFT INVOICE (not issued)", "发票草稿（未开具）"},
    [DOC_T_VOID] = {"INVOICE (VOID)", "发票（已作废）"},
    [DOC_T_FROM] = {"From", "开票方"},
    [DOC_T_BILL_TO] = {"Bill to", "收票方"},
    [DOC_T_ACCOUNT] = {"Account", "账户"},
    [DOC_T_TAX_ID] = {"Tax ID", "税号"},
    [DOC_T_NUMBER] = {"Number", "编号"},
    [DOC_T_PERIOD] = {"Period", "账期"},
    [DOC_T_ISSUED] = {"Issue date", "开具日期"},
    [DOC_T_DUE] = {"Due date", "到期日"},
    [DOC_T_CREDITS_INVOICE] = {"Credits invoice", "冲销发票"},
    [DOC_T_REASON] = {"Reason", "原因"},
    [DOC_T_VOIDED] = {"Voided", "已作废"},
    [DOC_T_DESCRIPTION] = {"Description", "项目"},
    [DOC_T_QUANTITY] = {"Quantity", "数量"},
    [DOC_T_UNIT] = {"Unit", "单位"},
    [DOC_T_UNIT_PRICE] = {"Unit price", "单价"},
    [DOC_T_AMOUNT] = {"Amount", "金额"},
    [DOC_T_CREDIT_LEFT] = {"Account credit left after this invoice", "本发票后账户余额"},
    [DOC_T_PAY] = {"Payment", "付款方式"},
    [DOC_T_GRANTS] = {"Credit grants (remaining on this invoice, before what expires)",
                      "赠金（本发票后剩余，未扣除到期部分）"},
    [DOC_T_TIME_ZONE] = {"Time zone", "时区"},
};

const char *doc_text(const doc_invoice *d, doc_text_id id)
{
    return texts[id][doc_language(d)];
}

const char *doc_title(const doc_invoice *d)
{
    if (strcmp(DOC_HEAD(d)->kind, "credit_note") == 0)
        return doc_text(d, DOC_T_CREDIT_NOTE);
    if (strcmp(DOC_HEAD(d)->status, "draft") == 0)
        return doc_text(d, DOC_T_DRAFT);
    if (strcmp(DOC_HEAD(d)->status, "void") == 0)
        return doc_text(d, DOC_T_VOID);
    return doc_text(d, DOC_T_INVOICE);
}

int doc_unit_digits(const char *unit)
{
    if (strcmp(unit, "term") == 0)
        return 0;
    if (strcmp(unit, "second") == 0)
        return -1;
    return 3;
}

/* Seconds @q (a whole number, as refunds store them) as "4 d 0 h" (minutes when not whole hours). */
static void duration(const char *q, char *buf, size_t size)
{
    char whole[NUMFMT_MAX];
    unsigned long long s;

    if (numfmt_decimal(q, 0, 0, "", whole, sizeof(whole)) != 0 ||
        strspn(whole, "0123456789") != strlen(whole) || strlen(whole) > 15) {
        snprintf(buf, size, "%s s", q);
        return;
    }
    s = strtoull(whole, NULL, 10);
    if (s % 3600 == 0)
        snprintf(buf, size, "%llu d %llu h", s / 86400, s % 86400 / 3600);
    else
        snprintf(buf, size, "%llu d %llu h %llu min", s / 86400, s % 86400 / 3600, s % 3600 / 60);
}

void doc_line_quantity(const bs_invoice_line *l, char *buf, size_t size)
{
    char exact[2 * NUMFMT_MAX];
    int digits = doc_unit_digits(l->unit);

    if (strcmp(l->quantity_den, "1") == 0)
        snprintf(exact, sizeof(exact), "%s", l->quantity);
    else
        snprintf(exact, sizeof(exact), "%s/%s", l->quantity, l->quantity_den);
    if (digits < 0) {
        duration(exact, buf, size);
        return;
    }
    if (numfmt_decimal(exact, digits, digits, ",", buf, size) != 0)
        snprintf(buf, size, "%s", exact);
}

/* A model or region worth printing: not empty and not the wildcard "*". */
static int named(const char *s)
{
    return s[0] != '\0' && strcmp(s, "*") != 0;
}

/* What a document calls catalog key @key: its display name @name when the catalog has one. */
static const char *shown(const char *name, const char *key)
{
    return name != NULL && name[0] != '\0' ? name : key;
}

/* ", model, region" of @l (the parts that are named) appended to @buf at @n. */
static void where(const bs_invoice_line *l, char *buf, size_t size, int n)
{
    if (n >= 0 && (size_t)n < size && named(l->model))
        n += snprintf(buf + n, size - (size_t)n, ", %s", shown(l->model_name, l->model));
    if (n >= 0 && (size_t)n < size && named(l->region))
        snprintf(buf + n, size - (size_t)n, ", %s", shown(l->region_name, l->region));
}

/* What meter @meter measures, in language @zh. */
static const char *meter_name(const char *meter, int zh)
{
    if (strcmp(meter, "gpu") == 0)
        return zh ? "GPU 时长" : "GPU time";
    if (strcmp(meter, "gpuless") == 0)
        return zh ? "无 GPU 实例时长" : "GPU-less instance time";
    if (strcmp(meter, "storage") == 0)
        return zh ? "云硬盘" : "Persistent disk";
    if (strcmp(meter, "traffic") == 0)
        return zh ? "流量" : "Traffic";
    return meter;
}

void doc_line_description(const doc_invoice *d, const bs_invoice_line *l, char *buf, size_t size)
{
    int zh = doc_language(d) == DOC_ZH;
    int free_ = strspn(l->amount, "-0.") == strlen(l->amount);
    char q[64];
    int n;

    if (strcmp(l->kind, "fee") == 0) {
        n = snprintf(buf, size, zh ? "套餐 %s" : "Plan %s", shown(l->plan_name, l->plan));
    } else if (strcmp(l->kind, "refund") == 0) {
        duration(l->quantity, q, sizeof(q));
        if (l->unused_from_local[0] != '\0')
            n = snprintf(buf, size,
                         zh ? "套餐 %2$s 自 %3$s 起未使用的 %1$s" : "Unused %s of plan %s from %s",
                         q, shown(l->plan_name, l->plan), l->unused_from_local);
        else
            n = snprintf(buf, size, zh ? "套餐 %2$s 未使用的 %1$s" : "Unused %s of plan %s", q,
                         shown(l->plan_name, l->plan));
    } else if (strcmp(l->kind, "included") == 0) {
        n = snprintf(buf, size, zh ? "%s（套餐内含）" : "%s (included in plan)",
                     meter_name(l->meter, zh));
    } else {
        n = snprintf(buf, size, "%s%s", meter_name(l->meter, zh),
                     free_ && strcmp(l->kind, "usage") == 0 ? (zh ? "（免费）" : " (free)") : "");
    }
    where(l, buf, size, n);
    n = (int)strlen(buf);
    if (strcmp(l->kind, "adjustment") == 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, zh ? "（%s 的迟到用量）" : " (late usage of %s)",
                 l->adjusts_period);
}
