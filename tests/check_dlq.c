/*
 * check_dlq.c - billingd's dead-letter producer (billingd/dlq.c) against
 * librdkafka's mock cluster (test.mock.num.brokers): no broker needed.
 * A fatal error of the idempotent producer (rd_kafka_test_fatal_error,
 * which a real broker cannot be made to give on demand) fails the batch
 * as transient, logs the cause, and the next batch goes through on a new
 * producer.
 */
#include "config.h"

#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "dlq.h"

static bd_config cfg;

static void mock_config(void)
{
    memset(&cfg, 0, sizeof(cfg));
    cfg.kafka[0].key = (char *)"test.mock.num.brokers";
    cfg.kafka[0].value = (char *)"1";
    cfg.kafka[1].key = (char *)"message.timeout.ms";
    cfg.kafka[1].value = (char *)"10000";
    cfg.n_kafka = 2;
    cfg.dead_letter_topic = (char *)"dlq-mock";
}

/* One rejected record, as bs_ingest gives it to the hook. */
static bs_status publish_one(bd_dlq *q, bs_error *err)
{
    static const char data[] = "not an event";
    bs_record r;
    bs_record_result res;

    memset(&r, 0, sizeof(r));
    memset(&res, 0, sizeof(res));
    r.data = data;
    r.len = sizeof(data) - 1;
    r.kafka_topic = "events";
    r.kafka_partition = 0;
    r.kafka_offset = 7;
    res.outcome = BS_RECORD_REJECTED;
    res.reason_code = "parse";
    res.reason = "record 0: not an event";
    return bd_dlq_hook(q, NULL, &r, &res, 1, err);
}

START_TEST(test_fatal_producer_is_made_again)
{
    bs_error err;
    bd_dlq *q;
    rd_kafka_t *before;

    mock_config();
    q = bd_dlq_new(&cfg, NULL);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(publish_one(q, &err), BS_OK);
    before = bd_dlq_producer(q);
    ck_assert_int_eq(rd_kafka_test_fatal_error(
                         before, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, "injected"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    /* The batch with the fatal producer fails, as something that may pass. */
    ck_assert_int_eq(publish_one(q, &err), BS_ERR_RETRY);
    ck_assert_msg(strstr(err.message, "fatal") != NULL, "%s", err.message);
    ck_assert(bd_dlq_producer(q) != before);
    ck_assert_int_eq(rd_kafka_fatal_error(bd_dlq_producer(q), NULL, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
    /* The retried batch goes through on the new producer. */
    ck_assert_int_eq(publish_one(q, &err), BS_OK);
    bd_dlq_free(q);
}
END_TEST

static Suite *dlq_suite(void)
{
    Suite *s = suite_create("dlq");
    TCase *tc = tcase_create("mock");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fatal_producer_is_made_again);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(dlq_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
