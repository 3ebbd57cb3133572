// peer-balance - a small Go server answering GET /v1/accounts/{id}/balance
// over billingd's tables, written for bench/api-balance.sh (issue 25: "the
// same figures for a peer measured in the same run"). It is a benchmark
// tool, not part of the engine: not built by make or CI. What it does and
// what it leaves out is in README.md.
//
//	peer-balance -listen 127.0.0.1:PORT -db CONNINFO [-conns 4]
package main

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/blake2b"
)

// The statements of one balance, sent together (pgx.Batch: one round trip).
const (
	sqlKey = `SELECT secret_hash, scopes::text[], account_id FROM billing.api_keys
		WHERE id = $1 AND revoked_at IS NULL`
	sqlAccount = `SELECT a.currency::text, a.time_zone, a.tax_rate::text, c.digits
		FROM billing.accounts a JOIN billing.currencies c ON c.code = a.currency WHERE a.id = $1`
	// The priced aggregates with their rate (the version they were rated at).
	sqlAggregates = `SELECT to_char(a.month, 'YYYY-MM'), a.price_version_id::text || '|' || a.meter
		 || '|' || a.rate_model || '|' || a.rate_region, a.meter, a.quantity::text,
		a.quantity_den::text, r.price::text FROM billing.usage_aggregates a
		JOIN billing.rates r ON r.version_id = a.price_version_id AND r.meter = a.meter
		 AND r.model = a.rate_model AND r.region = a.rate_region
		WHERE a.account_id = $1 AND a.rate_kind = 'priced' AND a.event_count > 0`
	sqlGrants = `SELECT id, amount::text, granted_at, expires_at, priority FROM billing.credit_grants
		WHERE account_id = $1 ORDER BY id`
	// What finalized months (but this one) took from each grant, in minor units.
	sqlHistory = `SELECT to_char(i.month, 'YYYY-MM'), l.grant_id, (-sum(l.amount_minor))::text
		FROM billing.invoices i JOIN billing.credit_ledger l ON l.invoice_id = i.id
		WHERE i.account_id = $1 AND i.kind = 'invoice' AND i.status = 'finalized'
		 AND i.month <> $2::date GROUP BY 1, 2`
	sqlFinalized = `SELECT DISTINCT to_char(month, 'YYYY-MM') FROM billing.invoices
		WHERE account_id = $1 AND kind = 'invoice' AND status = 'finalized' AND month <> $2::date`
	// The events running now with the price in force now (the latest version
	// started, the exact model and region before a '*' rate).
	sqlRunning = `SELECT e.meter, e.quantity::text, p.price::text FROM billing.usage_events e
		CROSS JOIN LATERAL (SELECT r.price FROM billing.rates r
		 JOIN billing.price_versions v ON v.id = r.version_id
		 WHERE v.effective_from <= $2 AND r.meter = e.meter AND r.model IN (e.model, '*')
		  AND r.region IN (e.region, '*')
		 ORDER BY v.effective_from DESC, v.revision DESC, r.model = '*', r.region = '*' LIMIT 1) p
		WHERE e.account_id = $1 AND e.start_time <= $2 AND e.end_time > $2`
)

type server struct {
	pool *pgxpool.Pool
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

func rat(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("not a number: %q", s)
	}
	return r, nil
}

// roundHalfUp rounds x to @digits decimals, halves away from zero.
func roundHalfUp(x *big.Rat, digits int) *big.Rat {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)
	v := new(big.Rat).Mul(x, new(big.Rat).SetInt(scale))
	num := new(big.Int).Abs(v.Num())
	q, m := new(big.Int).QuoRem(num, v.Denom(), new(big.Int))
	if new(big.Int).Lsh(m, 1).Cmp(v.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if v.Sign() < 0 {
		q.Neg(q)
	}
	return new(big.Rat).SetFrac(q, scale)
}

// exact prints x as an exact decimal with trailing zeros dropped (x has a
// finite decimal expansion: a rounded amount, a grant less minor units).
func exact(x *big.Rat) string {
	s := x.FloatString(12)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// perUnit is the divisor from a stored aggregate (units x ns, or bytes) to
// the unit the price is per: GPU-hours, GB-months (the local month's
// length), GB.
func perUnit(meter string, monthStart time.Time) *big.Rat {
	switch meter {
	case "gpu", "gpuless":
		return big.NewRat(3600*1000000000, 1)
	case "storage":
		end := monthStart.AddDate(0, 1, 0)
		return big.NewRat(end.Sub(monthStart).Nanoseconds(), 1)
	default:
		return big.NewRat(1000000000, 1)
	}
}

type grant struct {
	id       string
	left     *big.Rat
	from, to time.Time
	priority int32
}

type balanceOut struct {
	Account           string     `json:"account"`
	At                string     `json:"at"`
	Currency          string     `json:"currency"`
	CreditRemaining   string     `json:"credit_remaining"`
	Month             string     `json:"month"`
	Subtotal          string     `json:"subtotal"`
	Credits           string     `json:"credits"`
	Tax               string     `json:"tax"`
	Total             string     `json:"total"`
	AccountCredit     string     `json:"account_credit"`
	AccountCreditLeft string     `json:"account_credit_left"`
	Grants            []grantOut `json:"grants"`
	ExhaustsAt        *string    `json:"exhausts_at"`
	RunningEvents     int        `json:"running_events"`
}

type grantOut struct {
	Grant     string `json:"grant"`
	Remaining string `json:"remaining"`
	ExpiresAt string `json:"expires_at"`
}

var errNotFound = errors.New("no account")

func (s *server) balance(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("id")
	auth := r.Header.Get("Authorization")
	if len(auth) < 7 || !strings.EqualFold(auth[:7], "Bearer ") {
		fail(w, 401, "Unauthorized", "an API key is needed: Authorization: Bearer <key>")
		return
	}
	id, secret, ok := parseKey(auth[7:])
	if !ok {
		fail(w, 401, "Unauthorized", "the API key is unknown, malformed or revoked")
		return
	}
	now := time.Now().Truncate(time.Second)
	ctx := r.Context()
	out, status, err := s.compute(ctx, id, secret, account, now)
	if err != nil {
		switch {
		case status == 401:
			fail(w, 401, "Unauthorized", "the API key is unknown, malformed or revoked")
		case status == 403:
			fail(w, 403, "Scope", "this key lacks the scope accounts:read")
		case status == 404:
			fail(w, 404, "Not found", fmt.Sprintf("no account '%s'", account))
		default:
			log.Printf("balance %s: %v", account, err)
			fail(w, 500, "Internal", err.Error())
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// compute reads everything in one batch and does the arithmetic.
func (s *server) compute(ctx context.Context, keyID int64, secret []byte, account string, now time.Time) (*balanceOut, int, error) {
	// The month for the history is the account's local month of now; the
	// batch asks with the UTC month and the answer is checked below.
	month := now.UTC().Format("2006-01") + "-01"
	b := &pgx.Batch{}
	b.Queue(sqlKey, keyID)
	queueAccount(b, account, month, now)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()

	// The key.
	var hash []byte
	var scopes []string
	var bound *string
	err := br.QueryRow().Scan(&hash, &scopes, &bound)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 401, err
	}
	if err != nil {
		return nil, 500, err
	}
	want := blake2b.Sum256(secret)
	if subtle.ConstantTimeCompare(want[:], hash) != 1 {
		return nil, 401, errors.New("bad key")
	}
	allowed := false
	for _, sc := range scopes {
		allowed = allowed || sc == "accounts:read" || sc == "admin"
	}
	if !allowed {
		return nil, 403, errors.New("scope")
	}
	if bound != nil && *bound != account {
		return nil, 404, errNotFound
	}

	// The account.
	acc, status, err := readAccount(br)
	if err != nil {
		return nil, status, err
	}
	localMonth := now.In(acc.loc).Format("2006-01")
	if localMonth+"-01" != month {
		// The account's local month is not the UTC one (the first hours of
		// a month east of UTC): the history's month was wrong; ask again.
		br.Close()
		b := &pgx.Batch{}
		queueAccount(b, account, localMonth+"-01", now)
		br = s.pool.SendBatch(ctx, b)
		defer br.Close()
		if acc, status, err = readAccount(br); err != nil {
			return nil, status, err
		}
	}
	return finish(br, account, now, acc, localMonth)
}

// queueAccount queues the statements about the account, for the history of @month.
func queueAccount(b *pgx.Batch, account, month string, now time.Time) {
	b.Queue(sqlAccount, account)
	b.Queue(sqlAggregates, account)
	b.Queue(sqlGrants, account)
	b.Queue(sqlHistory, account, month)
	b.Queue(sqlFinalized, account, month)
	b.Queue(sqlRunning, account, now)
}

type accountRow struct {
	currency string
	loc      *time.Location
	digits   int
	taxRate  *big.Rat
}

// readAccount reads the account's row: 404 when there is none.
func readAccount(br pgx.BatchResults) (*accountRow, int, error) {
	var currency, zone, taxText string
	var digits int16
	err := br.QueryRow().Scan(&currency, &zone, &taxText, &digits)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 404, errNotFound
	}
	if err != nil {
		return nil, 500, err
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, 500, err
	}
	taxRate, err := rat(taxText)
	if err != nil {
		return nil, 500, err
	}
	return &accountRow{currency, loc, int(digits), taxRate}, 200, nil
}

func finish(br pgx.BatchResults, account string, now time.Time, acc *accountRow, month string) (*balanceOut, int, error) {
	loc, currency, digits, taxRate := acc.loc, acc.currency, acc.digits, acc.taxRate
	// The charges of each month: the exact amounts of a rate's aggregates
	// summed into one line, each line rounded.
	lines := map[[2]string]*big.Rat{}
	rows, _ := br.Query()
	for rows.Next() {
		var m, rate, meter, qty, den, price string
		if err := rows.Scan(&m, &rate, &meter, &qty, &den, &price); err != nil {
			return nil, 500, err
		}
		q, err1 := rat(qty)
		d, err2 := rat(den)
		p, err3 := rat(price)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, 500, err
		}
		start, _ := time.ParseInLocation("2006-01", m, loc)
		line := new(big.Rat).Quo(q, d)
		line.Quo(line, perUnit(meter, start))
		line.Mul(line, p)
		k := [2]string{m, rate}
		if lines[k] == nil {
			lines[k] = new(big.Rat)
		}
		lines[k].Add(lines[k], line)
	}
	if err := rows.Err(); err != nil {
		return nil, 500, err
	}
	charges := map[string]*big.Rat{}
	for k, amount := range lines {
		if charges[k[0]] == nil {
			charges[k[0]] = new(big.Rat)
		}
		charges[k[0]].Add(charges[k[0]], roundHalfUp(amount, digits))
	}

	var grants []*grant
	rows, _ = br.Query()
	for rows.Next() {
		var g grant
		var amount string
		if err := rows.Scan(&g.id, &amount, &g.from, &g.to, &g.priority); err != nil {
			return nil, 500, err
		}
		a, err := rat(amount)
		if err != nil {
			return nil, 500, err
		}
		g.left = a
		grants = append(grants, &g)
	}
	if err := rows.Err(); err != nil {
		return nil, 500, err
	}
	byID := map[string]*grant{}
	for _, g := range grants {
		byID[g.id] = g
	}
	minor := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil))

	// What finalized months took, as the ledger says.
	rows, _ = br.Query()
	for rows.Next() {
		var m, gid, taken string
		if err := rows.Scan(&m, &gid, &taken); err != nil {
			return nil, 500, err
		}
		t, err := rat(taken)
		if err != nil {
			return nil, 500, err
		}
		if g := byID[gid]; g != nil {
			g.left.Sub(g.left, t.Quo(t, minor))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 500, err
	}
	finalized := map[string]bool{}
	rows, _ = br.Query()
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, 500, err
		}
		finalized[m] = true
	}
	if err := rows.Err(); err != nil {
		return nil, 500, err
	}

	// The other months, oldest first, take from the grants valid in them:
	// the highest priority first, then the one expiring first.
	months := make([]string, 0, len(charges))
	for m := range charges {
		if !finalized[m] && m <= month {
			months = append(months, m)
		}
	}
	sort.Strings(months)
	credits := new(big.Rat)
	for _, m := range months {
		start, _ := time.ParseInLocation("2006-01", m, loc)
		end := start.AddDate(0, 1, 0)
		if m == month {
			end = now
		}
		due := new(big.Rat).Set(charges[m])
		valid := []*grant{}
		for _, g := range grants {
			if g.from.Before(end) && g.to.After(start) {
				valid = append(valid, g)
			}
		}
		sort.SliceStable(valid, func(i, j int) bool {
			if valid[i].priority != valid[j].priority {
				return valid[i].priority > valid[j].priority
			}
			return valid[i].to.Before(valid[j].to)
		})
		for _, g := range valid {
			if due.Sign() == 0 {
				break
			}
			take := new(big.Rat).Set(g.left)
			if take.Cmp(due) > 0 {
				take.Set(due)
			}
			if take.Sign() <= 0 {
				continue
			}
			g.left.Sub(g.left, take)
			due.Sub(due, take)
			if m == month {
				credits.Add(credits, take)
			}
		}
	}

	// The burn of the events running now, per second.
	burn := new(big.Rat)
	running := 0
	rows, _ = br.Query()
	for rows.Next() {
		var meter, qty, price string
		if err := rows.Scan(&meter, &qty, &price); err != nil {
			return nil, 500, err
		}
		q, err1 := rat(qty)
		p, err2 := rat(price)
		if err := errors.Join(err1, err2); err != nil {
			return nil, 500, err
		}
		running++
		if meter == "gpu" || meter == "gpuless" {
			burn.Add(burn, new(big.Rat).Quo(new(big.Rat).Mul(q, p), big.NewRat(3600, 1)))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 500, err
	}

	out := &balanceOut{Account: account, At: now.UTC().Format(time.RFC3339), Currency: currency,
		Month: month, Grants: []grantOut{}}
	left := new(big.Rat)
	for _, g := range grants {
		if !g.from.After(now) && g.to.After(now) {
			left.Add(left, g.left)
			out.Grants = append(out.Grants, grantOut{g.id, g.left.FloatString(digits), g.to.UTC().Format("2006-01-02T15:04:05Z")})
		}
	}
	subtotal := new(big.Rat)
	if c := charges[month]; c != nil {
		subtotal.Set(c)
	}
	net := new(big.Rat).Sub(subtotal, credits)
	tax := roundHalfUp(new(big.Rat).Mul(net, taxRate), digits)
	total := new(big.Rat).Add(net, tax)
	out.CreditRemaining = exact(left)
	out.Subtotal = subtotal.FloatString(digits)
	out.Credits = credits.FloatString(digits)
	out.Tax = tax.FloatString(digits)
	out.Total = total.FloatString(digits)
	out.AccountCredit = new(big.Rat).FloatString(digits)
	out.AccountCreditLeft = out.AccountCredit
	out.RunningEvents = running
	if left.Sign() <= 0 {
		at := out.At
		out.ExhaustsAt = &at
	} else if burn.Sign() > 0 {
		secs := new(big.Rat).Quo(left, burn)
		whole := new(big.Int).Quo(secs.Num(), secs.Denom())
		at := now.Add(time.Duration(whole.Int64()) * time.Second).UTC().Format(time.RFC3339)
		out.ExhaustsAt = &at
	}
	return out, 200, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	db := flag.String("db", "", "PostgreSQL connection string (libpq key=value or URL)")
	conns := flag.Int("conns", 4, "database connections (billingd's API uses 4)")
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
	s := &server{pool: pool}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/accounts/{id}/balance", s.balance)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	log.Printf("peer-balance: serving on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
