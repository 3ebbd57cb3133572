// peer-events - a small Go server answering POST /v1/events as billingd's
// Kafka mode does (api.events=kafka), written for bench/api-events.sh
// (issue 25: "the same figures for a peer measured in the same run"). It
// is a benchmark tool, not part of the engine: not built by make or CI.
// What it does and what it leaves out is in README.md.
//
//	peer-events -listen 127.0.0.1:PORT -db CONNINFO -brokers HOST:PORT -topic TOPIC
package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/crypto/blake2b"
)

const (
	sqlKey = `SELECT secret_hash, scopes::text[], account_id FROM billing.api_keys
		WHERE id = $1 AND revoked_at IS NULL`
	eventsMax = 10000            // billingd's BD_EVENTS_MAX
	bodyMax   = 64 * 1024 * 1024 // billingd's api.body_max default order
	idMax     = 128              // libbilling's BL_ID_MAX
	attrMax   = 64               // BL_ATTR_MAX
)

// The meters and their billing.v1.Meter numbers.
var meters = map[string]uint64{"gpu": 1, "gpuless": 2, "storage": 3, "traffic": 4}

type server struct {
	pool *pgxpool.Pool
	kc   *kgo.Client
}

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

func fail(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(problem{"urn:billing:problem:" + strings.ToLower(strings.ReplaceAll(title, " ", "-")), title, status, detail})
}

// parseKey splits "bk_<id>_<secret>" into the id and the secret's 32 bytes.
func parseKey(key string) (int64, []byte, bool) {
	rest, ok := strings.CutPrefix(key, "bk_")
	if !ok {
		return 0, nil, false
	}
	idText, secretText, ok := strings.Cut(rest, "_")
	if !ok || len(idText) == 0 || len(idText) > 18 || len(secretText) != 43 {
		return 0, nil, false
	}
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id < 1 {
		return 0, nil, false
	}
	secret, err := base64.RawURLEncoding.DecodeString(secretText)
	if err != nil || len(secret) != 32 {
		return 0, nil, false
	}
	return id, secret, true
}

// checkKey reads the key's row (one round trip, as billingd does on every
// request): 0 and the bound account, or the HTTP status.
func (s *server) checkKey(ctx context.Context, r *http.Request) (int, string) {
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return 401, ""
	}
	id, secret, ok := parseKey(key)
	if !ok {
		return 401, ""
	}
	var hash []byte
	var scopes []string
	var account *string
	if err := s.pool.QueryRow(ctx, sqlKey, id).Scan(&hash, &scopes, &account); err != nil {
		return 401, ""
	}
	want := blake2b.Sum256(secret)
	if subtle.ConstantTimeCompare(hash, want[:]) != 1 {
		return 401, ""
	}
	for _, sc := range scopes {
		if sc == "events:write" || sc == "admin" {
			if account != nil {
				return 0, *account
			}
			return 0, ""
		}
	}
	return 403, ""
}

// event is one element of the body as sent.
type event struct {
	ID       *string `json:"id"`
	Account  *string `json:"account"`
	Resource *string `json:"resource"`
	Meter    *string `json:"meter"`
	Start    *string `json:"start"`
	End      *string `json:"end"`
	Quantity *string `json:"quantity"`
	Model    *string `json:"model"`
	Region   *string `json:"region"`
}

// result is the answer's entry for one event, in billingd's shape.
type result struct {
	Index      int    `json:"index"`
	Status     string `json:"status"`
	ID         string `json:"id,omitempty"`
	ReasonCode string `json:"reason_code,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// validQuantity: a non-negative decimal, at most 10^18, at most 9 decimals.
func validQuantity(q string) string {
	ip, fp, dot := strings.Cut(q, ".")
	if q == "" || ip == "" && fp == "" || dot && fp == "" && ip == "" {
		return "field 'quantity': '" + q + "' is not a decimal number"
	}
	if strings.HasPrefix(ip, "-") {
		return "field 'quantity': '" + q + "' is negative"
	}
	for _, c := range ip + fp {
		if c < '0' || c > '9' {
			return "field 'quantity': '" + q + "' is not a decimal number"
		}
	}
	ip = strings.TrimLeft(ip, "0")
	if len(fp) > 9 || len(ip) > 19 || len(ip) == 19 && (ip != "1000000000000000000" || strings.Trim(fp, "0") != "") {
		return "field 'quantity': '" + q + "' exceeds 10^18 or has more than 9 decimals"
	}
	return ""
}

func text(name string, v *string, max int, empty bool) string {
	if v == nil {
		if empty {
			return ""
		}
		return "field '" + name + "' is missing"
	}
	if len(*v) > max || (!empty && *v == "") || strings.IndexByte(*v, 0) >= 0 {
		return "field '" + name + "' is empty, too long or holds a NUL"
	}
	return ""
}

// validate checks what the pipeline checks without a database; the
// reason, or "" and the event's start and end.
func validate(e *event) (string, time.Time, time.Time) {
	var start, end time.Time
	for _, f := range []struct {
		name  string
		v     *string
		max   int
		empty bool
	}{{"id", e.ID, idMax, false}, {"account", e.Account, idMax, false},
		{"resource", e.Resource, idMax, false}, {"model", e.Model, attrMax, true},
		{"region", e.Region, attrMax, true}} {
		if r := text(f.name, f.v, f.max, f.empty); r != "" {
			return r, start, end
		}
	}
	if e.Meter == nil {
		return "field 'meter' is missing", start, end
	}
	if _, ok := meters[*e.Meter]; !ok {
		return "field 'meter': '" + *e.Meter + "' is not gpu, gpuless, storage or traffic", start, end
	}
	if e.Start == nil || e.End == nil {
		return "field 'start' or 'end' is missing", start, end
	}
	var err error
	if start, err = time.Parse(time.RFC3339Nano, *e.Start); err != nil {
		return "field 'start': not an RFC 3339 instant", start, end
	}
	if end, err = time.Parse(time.RFC3339Nano, *e.End); err != nil {
		return "field 'end': not an RFC 3339 instant", start, end
	}
	if !end.After(start) {
		return "field 'end' must be after 'start'", start, end
	}
	if e.Quantity == nil {
		return "field 'quantity' is missing", start, end
	}
	return validQuantity(*e.Quantity), start, end
}

// The protobuf wire format of billing.v1.UsageEvent (proto/billing/v1/usage_event.proto).
func putVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func putString(b []byte, field uint64, s string) []byte {
	if s == "" {
		return b
	}
	b = putVarint(b, field<<3|2)
	b = putVarint(b, uint64(len(s)))
	return append(b, s...)
}

func putTime(b []byte, field uint64, t time.Time) []byte {
	var m []byte
	if sec := t.Unix(); sec != 0 {
		m = putVarint(putVarint(m, 1<<3), uint64(sec))
	}
	if ns := t.Nanosecond(); ns != 0 {
		m = putVarint(putVarint(m, 2<<3), uint64(ns))
	}
	b = putVarint(b, field<<3|2)
	b = putVarint(b, uint64(len(m)))
	return append(b, m...)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func encode(e *event, start, end time.Time) []byte {
	b := make([]byte, 0, 160)
	b = putString(b, 1, *e.ID)
	b = putString(b, 2, *e.Account)
	b = putString(b, 3, *e.Resource)
	b = putVarint(putVarint(b, 4<<3), meters[*e.Meter])
	b = putTime(b, 5, start)
	b = putTime(b, 6, end)
	b = putString(b, 7, *e.Quantity)
	b = putString(b, 8, str(e.Model))
	return putString(b, 9, str(e.Region))
}

// parse reads a JSON array, or JSON Lines when the type says so; an
// element that is not an event object is nil (rejected).
func parse(body []byte, lines bool) ([]*event, error) {
	var raws []json.RawMessage
	if lines {
		for len(body) > 0 {
			line, rest, _ := bytes.Cut(body, []byte{'\n'})
			body = rest
			if len(bytes.TrimSpace(line)) > 0 {
				raws = append(raws, line)
			}
			if len(raws) > eventsMax {
				break
			}
		}
	} else if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("body: expected a JSON array of events: %v", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("body: no event")
	}
	if len(raws) > eventsMax {
		return nil, fmt.Errorf("body: more than %d events per request", eventsMax)
	}
	evs := make([]*event, len(raws))
	for i, raw := range raws {
		e := new(event)
		if json.Unmarshal(raw, e) == nil {
			evs[i] = e
		}
	}
	return evs, nil
}

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	status, bound := s.checkKey(ctx, r)
	if status == 401 {
		fail(w, 401, "Unauthorized", "the API key is missing, unknown, malformed or revoked")
		return
	}
	if status == 403 {
		fail(w, 403, "Scope", "this key lacks the scope events:write")
		return
	}
	ct := r.Header.Get("Content-Type")
	lines := strings.HasPrefix(ct, "application/x-ndjson") || strings.HasPrefix(ct, "application/jsonl")
	if !lines && ct != "" && !strings.HasPrefix(ct, "application/json") {
		fail(w, 415, "Media type", "expected application/json or application/x-ndjson")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, bodyMax+1))
	if err != nil || len(body) > bodyMax {
		fail(w, 413, "Too large", "the body is over its limit")
		return
	}
	evs, err := parse(body, lines)
	if err != nil {
		fail(w, 400, "Body", err.Error())
		return
	}
	results := make([]result, len(evs))
	errs := make([]error, len(evs))
	var wg sync.WaitGroup
	rejected, queued := 0, 0
	for i, e := range evs {
		results[i].Index = i
		reason := "not an event object"
		var start, end time.Time
		if e != nil {
			reason, start, end = validate(e)
			results[i].ID = str(e.ID)
		}
		if reason == "" && bound != "" && *e.Account != bound {
			reason = "field 'account': this key sends events of its account only"
		}
		if reason != "" {
			results[i].Status, results[i].ReasonCode, results[i].Reason = "rejected", "invalid", reason
			rejected++
			continue
		}
		wg.Add(1)
		rec := &kgo.Record{Key: []byte(*e.Account), Value: encode(e, start, end)}
		s.kc.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	wg.Wait()
	failed := 0
	for i := range results {
		if results[i].Status != "" {
			continue
		}
		if errs[i] != nil {
			results[i].Status, results[i].Reason = "not_queued", errs[i].Error()
			failed++
		} else {
			results[i].Status = "queued"
			queued++
		}
	}
	// Content-Length framed, as billingd answers (not chunked).
	out, _ := json.Marshal(struct {
		Events   int      `json:"events"`
		Queued   int      `json:"queued"`
		Rejected int      `json:"rejected"`
		Results  []result `json:"results"`
	}{len(evs), queued, rejected, results})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	if failed > 0 {
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(503)
	} else {
		w.WriteHeader(202)
	}
	w.Write(out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8082", "address to serve on")
	db := flag.String("db", "", "PostgreSQL connection string (libpq key=value or URL), for the keys")
	conns := flag.Int("conns", 4, "database connections (billingd's API uses 4)")
	brokers := flag.String("brokers", "127.0.0.1:9092", "Kafka bootstrap servers, comma-separated")
	topic := flag.String("topic", "", "the usage topic")
	produceMs := flag.Int("produce-ms", 10000, "delivery timeout (billingd's api.produce_ms)")
	flag.Parse()
	cfg, err := pgxpool.ParseConfig(*db)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = int32(*conns)
	cfg.MinConns = int32(*conns)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// Idempotent (franz-go's default), acks=all, keyed by account with
	// librdkafka's default partitioner (consistent_random: CRC-32 of the
	// key modulo the partitions, so an account lands on the partition
	// billingd's producer picks), librdkafka's default linger of 5 ms.
	kc, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(time.Duration(*produceMs)*time.Millisecond),
		kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return func(r *kgo.Record, n int) int { return int(crc32.ChecksumIEEE(r.Key) % uint32(n)) }
		})),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer kc.Close()
	s := &server{pool: pool, kc: kc}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/events", s.events)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	log.Printf("peer-events: serving on %s, producing to %s", *listen, *topic)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
