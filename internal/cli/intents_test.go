package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// scene is one test's ledger with acct-1 configured (controlEnv), and the ledger API to put
// intents into the states the operator commands act on, as the roles would.
type scene struct {
	t   *testing.T
	ctx context.Context
	db  *dbtest.DB
	l   *ledger.Ledger
	env map[string]string
}

func newScene(t *testing.T) *scene {
	t.Helper()
	db, env := controlEnv(t)
	l, err := ledger.New(db.Pool, ledger.Config{Actor: "test"})
	require.NoError(t, err)
	s := &scene{t: t, ctx: context.Background(), db: db, l: l, env: env}
	s.exec(`UPDATE policies SET rate_per_minute = 0 WHERE scope = ''`)
	return s
}

func (s *scene) exec(sql string, args ...any) {
	s.t.Helper()
	_, err := s.db.Pool.Exec(s.ctx, sql, args...)
	require.NoError(s.t, err, sql)
}

func (s *scene) run(args ...string) result { return run(s.env, args...) }

func (s *scene) submit(text string) identity.DeliveryKey {
	s.t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(s.t, err)
	e, err := identity.NewEnvelope("acct-1", "post", "", req, "", nil)
	require.NoError(s.t, err)
	res, err := s.l.Submit(s.ctx, []identity.Envelope{e})
	require.NoError(s.t, err)
	require.Equal(s.t, ledger.Created, res[0].Outcome)
	return res[0].Key
}

func (s *scene) authorized(text string) ledger.Claim {
	s.t.Helper()
	c, err := s.l.Begin(s.ctx, s.submit(text), sha256.Sum256([]byte(text)), time.Minute)
	require.NoError(s.t, err)
	a, err := s.l.Authorize(s.ctx, c, 2*time.Minute, "sim/1")
	require.NoError(s.t, err)
	require.Equal(s.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	return c
}

func (s *scene) completed(text string, o ledger.Outcome) identity.DeliveryKey {
	s.t.Helper()
	c := s.authorized(text)
	_, err := s.l.Complete(s.ctx, c, o)
	require.NoError(s.t, err)
	return c.Key
}

func (s *scene) failed(text string) identity.DeliveryKey {
	return s.completed(text, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
}

func (s *scene) indeterminate(text string) identity.DeliveryKey {
	return s.completed(text, ledger.Outcome{Result: ledger.Unknown})
}

func (s *scene) published(text string) identity.DeliveryKey {
	return s.completed(text, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-" + text, Confirmed: true})
}

func (s *scene) parked(text string) identity.DeliveryKey {
	s.t.Helper()
	key := s.submit(text)
	require.NoError(s.t, s.l.Park(s.ctx, key, ledger.Actor{Name: "bob", Reason: "scene"}))
	return key
}

func (s *scene) intent(key identity.DeliveryKey) ledger.Intent {
	s.t.Helper()
	in, err := s.l.Get(s.ctx, key)
	require.NoError(s.t, err)
	return in
}

func (s *scene) lastTransition(key identity.DeliveryKey) ledger.Transition {
	s.t.Helper()
	rec, err := s.l.Inspect(s.ctx, key)
	require.NoError(s.t, err)
	return rec.Transitions[len(rec.Transitions)-1]
}

// ledgerState is what a refused or malformed command must leave as it was: every intent's
// state and sequence, and the history, outbox and attempts rows.
func (s *scene) ledgerState() string {
	s.t.Helper()
	var state string
	require.NoError(s.t, s.db.Pool.QueryRow(s.ctx, `SELECT concat_ws(' | ',
		(SELECT string_agg(encode(delivery_key, 'hex') || state || reason || transition_seq::TEXT, ',' ORDER BY delivery_key) FROM intents),
		(SELECT count(*)::TEXT FROM history), (SELECT count(*)::TEXT FROM outbox), (SELECT count(*)::TEXT FROM attempts),
		(SELECT count(*)::TEXT FROM text_claims))`).Scan(&state))
	return state
}

func (s *scene) outboxRows(key identity.DeliveryKey) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.db.Pool.QueryRow(s.ctx, `SELECT count(*) FROM outbox WHERE delivery_key = $1`, key.Bytes()).Scan(&n))
	return n
}

type listed struct {
	Intents []struct {
		Key                string
		Account            string
		Action             string
		State              string
		Reason             string
		AttemptsAuthorized int `json:"attempts_authorized"`
	}
	NextAfter *string `json:"next_after"`
}

func TestIntentsLsPagesInKeyOrderAndFilters(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	for i := range 3 {
		s.submit(fmt.Sprintf("pending %d", i))
	}
	failed := s.failed("failed")
	parked := s.parked("parked")

	res := s.run("intents", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 6, res.stdout)
	require.Regexp(t, `^KEY\s+ACCOUNT\s+ACTION\s+STATE\s+REASON\s+ATTEMPTS\s+UPDATED$`, lines[0])
	require.Empty(t, res.stderr, "one page holds them all: no next page")

	res = s.run("intents", "ls", "--state", "failed")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^`+failed.String()+`\s+acct-1\s+post\s+failed\s+connection_failed\s+1\s+\S+$`, res.stdout)
	require.Equal(t, 2, strings.Count(res.stdout, "\n"))

	res = s.run("intents", "ls", "--account", "acct-1", "--state", "parked", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var page listed
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &page))
	require.Len(t, page.Intents, 1)
	require.Equal(t, parked.String(), page.Intents[0].Key)
	require.Equal(t, "operator_parked", page.Intents[0].Reason)
	require.Nil(t, page.NextAfter)

	res = s.run("intents", "ls", "--account", "acct-other")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, 1, strings.Count(res.stdout, "\n"), "only the header")

	// Page through all five, two at a time, with the cursor each page hands over.
	var keys []string
	args := []string{"intents", "ls", "--limit", "2", "--json"}
	for range 5 {
		res = s.run(args...)
		require.Equal(t, cli.ExitOK, res.code, res.stderr)
		page = listed{}
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &page))
		for _, in := range page.Intents {
			keys = append(keys, in.Key)
		}
		if page.NextAfter == nil {
			break
		}
		require.Equal(t, keys[len(keys)-1], *page.NextAfter)
		args = []string{"intents", "ls", "--limit", "2", "--json", "--after", *page.NextAfter}
	}
	require.Len(t, keys, 5)
	require.IsIncreasing(t, keys, "delivery-key order, each intent once")

	res = s.run("intents", "ls", "--limit", "2")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "more intents follow: atmost intents ls --limit 2 --after "+keys[1]+"\n", res.stderr)
}

// intents ls --sort created|updated [--desc]: pages in that time order, ties in key order, each
// intent once, following the command each full page prints; --reason, --since and --until
// filter; a --since given as a duration is carried to the next page as the time it meant.
func TestIntentsLsSortsByTimeAndFiltersByReasonAndTime(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	base := time.Date(2026, 1, 2, 3, 4, 5, 250000000, time.UTC)
	type timed struct {
		key              string
		created, updated time.Time
	}
	var all []timed
	for i := range 7 {
		var key identity.DeliveryKey
		if i < 6 {
			key = s.submit(fmt.Sprintf("timed %d", i))
		} else {
			key = s.failed("timed failed")
		}
		// Pairs share a created time; the updated times run the other way.
		in := timed{key.String(), base.Add(time.Duration(i/2) * time.Second), base.Add(time.Hour - time.Duration(i)*time.Millisecond)}
		s.exec(`UPDATE intents SET created_at = $2, updated_at = $3 WHERE delivery_key = $1`, key.Bytes(), in.created, in.updated)
		all = append(all, in)
	}
	order := func(by func(timed) time.Time, desc bool) []string {
		sorted := slices.Clone(all)
		slices.SortFunc(sorted, func(a, b timed) int {
			c := by(a).Compare(by(b))
			if c == 0 {
				c = strings.Compare(a.key, b.key)
			}
			if desc {
				c = -c
			}
			return c
		})
		var keys []string
		for _, in := range sorted {
			keys = append(keys, in.key)
		}
		return keys
	}
	byCreated := func(in timed) time.Time { return in.created }
	byUpdated := func(in timed) time.Time { return in.updated }
	follow := func(args ...string) []string {
		t.Helper()
		var keys []string
		for range 10 {
			res := s.run(args...)
			require.Equal(t, cli.ExitOK, res.code, "%v: %s", args, res.stderr)
			lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
			for _, line := range lines[1:] {
				keys = append(keys, strings.Fields(line)[0])
			}
			next, more := strings.CutPrefix(strings.TrimSpace(res.stderr), "more intents follow: atmost ")
			if !more {
				require.Empty(t, res.stderr)
				return keys
			}
			args = strings.Fields(next)
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--sort", "created"}, order(byCreated, false)},
		{[]string{"--sort", "created", "--desc"}, order(byCreated, true)},
		{[]string{"--sort", "updated"}, order(byUpdated, false)},
		{[]string{"--sort", "updated", "--desc"}, order(byUpdated, true)},
	} {
		for _, limit := range []string{"1", "2", "3", "7"} {
			got := follow(append([]string{"intents", "ls", "--limit", limit}, tc.args...)...)
			require.Equal(t, tc.want, got, "%v, pages of %s", tc.args, limit)
		}
	}

	// With --json, next_after is where --after starts the next page.
	var keys []string
	args := []string{"intents", "ls", "--sort", "updated", "--desc", "--limit", "3", "--json"}
	for range 5 {
		res := s.run(args...)
		require.Equal(t, cli.ExitOK, res.code, res.stderr)
		require.Empty(t, res.stderr, "with --json the next page is next_after")
		var page listed
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &page))
		for _, in := range page.Intents {
			keys = append(keys, in.Key)
		}
		if page.NextAfter == nil {
			break
		}
		require.True(t, strings.HasSuffix(*page.NextAfter, ","+keys[len(keys)-1]), *page.NextAfter)
		args = []string{"intents", "ls", "--sort", "updated", "--desc", "--limit", "3", "--json", "--after", *page.NextAfter}
	}
	require.Equal(t, order(byUpdated, true), keys)

	// The filters: the reason, the sort's time (since inclusive, until exclusive).
	res := s.run("intents", "ls", "--reason", "connection_failed")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^`+all[6].key+`\s+acct-1\s+post\s+failed\s+connection_failed\s`, res.stdout)
	require.Equal(t, 2, strings.Count(res.stdout, "\n"))
	got := follow("intents", "ls", "--sort", "created", "--since", base.Add(time.Second).Format(time.RFC3339Nano), "--until", base.Add(3*time.Second).Format(time.RFC3339Nano))
	require.Equal(t, order(byCreated, false)[2:6], got)
	res = s.run("intents", "ls", "--sort", "created")
	require.Regexp(t, `^KEY\s+ACCOUNT\s+ACTION\s+STATE\s+REASON\s+ATTEMPTS\s+CREATED\s+UPDATED\n`, res.stdout)
	require.Contains(t, res.stdout, "2026-01-02T03:04:06Z", "the time it is sorted by")

	// A duration is the time it meant, on every page.
	s.submit("just now")
	res = s.run("intents", "ls", "--since", "1h", "--limit", "1")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, 2, strings.Count(res.stdout, "\n"), "only the intent submitted now changed in the last hour")
	require.Empty(t, res.stderr)
	res = s.run("intents", "ls", "--until", "1h", "--limit", "6", "--sort", "updated")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `^more intents follow: atmost intents ls --until 20\d\d-\d\d-\d\dT\S+Z --sort updated --limit 6 --after 2026-01-02T04:04:05\.\d+Z,dk1:`, res.stderr)
	require.Len(t, follow(strings.Fields(strings.TrimPrefix(strings.TrimSpace(res.stderr), "more intents follow: atmost "))...), 1,
		"the next page keeps the bound: the intent of just now stays out")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sort", "colour"}, "give one of key, created, updated"},
		{[]string{"--desc"}, "--desc orders by time"},
		{[]string{"--reason", "lost"}, "connection_failed"},
		{[]string{"--reason", ""}, "--reason is empty"},
		{[]string{"--state", "parked", "--reason", "connection_failed"}, "contradict each other: connection_failed is a reason of failed; give one of attempts_exhausted"},
		{[]string{"--since", "soon"}, "RFC 3339"},
		{[]string{"--since", "1h", "--until", "2h"}, "is not before --until"},
		{[]string{"--sort", "created", "--after", all[0].key}, "give TIME,KEY"},
		{[]string{"--after", "2026-01-02T03:04:05Z," + all[0].key}, "in key order, give the key alone"},
		{[]string{"--sort", "updated", "--after", "yesterday," + all[0].key}, "is not an RFC 3339 time"},
		{[]string{"--sort", "updated", "--after", "2026-01-02T03:04:05Z,dk1:zz"}, "is not a delivery key"},
	} {
		res := s.run(append([]string{"intents", "ls"}, tc.args...)...)
		require.Equal(t, cli.ExitUsage, res.code, "%v: %s", tc.args, res.stderr)
		require.Contains(t, res.stderr, tc.want, "%v", tc.args)
	}
}

func TestIntentsShowPrintsEverySection(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	key := s.indeterminate("lost in the network")
	rec, err := s.l.ClaimReconciliation(s.ctx, key, newClaimToken())
	require.NoError(t, err)
	_, err = s.l.ResolveReconciliation(s.ctx, rec, ledger.NotFound, "", map[string]any{"lookup": "by text"})
	require.NoError(t, err)

	res := s.run("intents", "show", key.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^intent\s+`+key.String()+`$`, res.stdout)
	require.Regexp(t, `(?m)^request\s+\{"text":"lost in the network"\}$`, res.stdout)
	require.Regexp(t, `(?m)^state\s+parked \(reconcile_not_found\)$`, res.stdout)
	require.Regexp(t, `(?m)^attempts\s+1 authorized, 1 opened$`, res.stdout)
	for _, section := range []string{"\nattempts (1)\nTOKEN", "\nevidence (1)\nAT", "\nhistory (5)\nSEQ", "\nreconciliations (2)\nAT"} {
		require.Contains(t, res.stdout, section)
	}
	require.Regexp(t, `(?m)^1\s+\S+\s+\(new\) -> pending\s+submitted\s+test\s+-$`, res.stdout)
	require.Regexp(t, `(?m)^5\s+\S+\s+indeterminate -> parked\s+reconcile_not_found\s+test\s+\{"lookup":"by text"\}$`, res.stdout)
	require.Regexp(t, `(?m)^\S+\s+`+rec.Token.String()+`\s+resolved\s+not_found\s+-\s+test`, res.stdout)

	res = s.run("intents", "show", "--json", key.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var doc struct {
		Intent struct {
			Key     string
			State   string
			Request json.RawMessage
			Attempt *string
		}
		Attempts []struct{ Attempt string }
		Evidence []struct {
			Result string
			Detail json.RawMessage
		}
		History []struct {
			Seq      int64
			From, To string
			Actor    string
		}
		Reconciliations []struct{ Step, Result string }
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &doc))
	require.Equal(t, key.String(), doc.Intent.Key)
	require.Equal(t, "parked", doc.Intent.State)
	require.JSONEq(t, `{"text":"lost in the network"}`, string(doc.Intent.Request))
	require.Equal(t, rec.Token.String(), *doc.Intent.Attempt)
	require.Len(t, doc.Attempts, 1)
	require.Equal(t, rec.Token.String(), doc.Attempts[0].Attempt)
	require.Len(t, doc.Evidence, 1)
	require.Equal(t, "unknown", doc.Evidence[0].Result)
	require.Len(t, doc.History, 5)
	require.Equal(t, "", doc.History[0].From)
	require.Equal(t, "parked", doc.History[4].To)
	require.Equal(t, []struct{ Step, Result string }{{"claimed", ""}, {"resolved", "not_found"}}, doc.Reconciliations)

	// A fresh intent: empty sections say so, and the JSON has empty lists, not nulls.
	fresh := s.submit("fresh")
	res = s.run("intents", "show", fresh.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "\nattempts (0)\n  none\n")
	require.Contains(t, res.stdout, "\nreconciliations (0)\n  none\n")
	res = s.run("intents", "show", fresh.String(), "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, `"attempts": []`)
	require.Contains(t, res.stdout, `"reconciliations": []`)
	require.Contains(t, res.stdout, `"attempt": null`)

	// A reply names its parent, which `atmost intents show` then shows in turn.
	req, err := json.Marshal(map[string]string{"text": "a reply"})
	require.NoError(t, err)
	env, err := identity.NewEnvelope("acct-1", "post", "", req, "", nil)
	require.NoError(t, err)
	env, err = env.InReplyTo(fresh)
	require.NoError(t, err)
	sub, err := s.l.Submit(s.ctx, []identity.Envelope{env})
	require.NoError(t, err)
	res = s.run("intents", "show", sub[0].Key.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^reply to\s+`+fresh.String()+`$`, res.stdout)
	require.NotContains(t, s.run("intents", "show", fresh.String()).stdout, "reply to", "only a reply names a parent")

	res = s.run("intents", "show", "dk1:"+strings.Repeat("0", 63)+"1")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "no intent has the delivery key dk1:000")
}

// A post parked as a duplicate of its text says which intent holds the text and when the
// window ends: a date once the holder is authorized, and how long after its authorization while
// it was stored first and still waits.
func TestIntentsShowNamesWhoHoldsADuplicateText(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	post := func(occurrence string) identity.DeliveryKey {
		req, err := json.Marshal(map[string]string{"text": "said twice"})
		require.NoError(t, err)
		e, err := identity.NewEnvelope("acct-1", "post", "", req, occurrence, nil)
		require.NoError(t, err)
		res, err := s.l.Submit(s.ctx, []identity.Envelope{e})
		require.NoError(t, err)
		return res[0].Key
	}
	authorize := func(key identity.DeliveryKey) ledger.Authorization {
		c, err := s.l.Begin(s.ctx, key, sha256.Sum256([]byte(key.String())), time.Minute)
		require.NoError(t, err)
		a, err := s.l.Authorize(s.ctx, c, 2*time.Minute, "sim/1")
		require.NoError(t, err)
		return a
	}
	original, waiting, sent := post(""), post("again"), post("once more")
	require.Equal(t, ledger.ReasonDuplicateText, authorize(waiting).Reason, "the original is stored first and waits")
	require.True(t, authorize(original).Authorized())
	require.Equal(t, ledger.ReasonDuplicateText, authorize(sent).Reason)

	res := s.run("intents", "show", waiting.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^state\s+parked \(duplicate_text\)$`, res.stdout)
	require.Regexp(t, `(?m)^text held by\s+`+original.String()+`$`, res.stdout)
	require.Regexp(t, `(?m)^window ends\s+24h0m0s after the holder is authorized`, res.stdout)

	var lastAt time.Time
	require.NoError(t, s.db.Pool.QueryRow(s.ctx, `SELECT last_at FROM text_claims`).Scan(&lastAt))
	res = s.run("intents", "show", sent.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^text held by\s+`+original.String()+`$`, res.stdout)
	require.Regexp(t, `(?m)^window ends\s+`+lastAt.Add(24*time.Hour).UTC().Format(time.RFC3339)+`$`, res.stdout)

	res = s.run("intents", "show", original.String())
	require.NotContains(t, res.stdout, "text held by", "only a duplicate says so")
}

func TestParkResolveRetryActAsTheOperator(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	failed := s.failed("platform was down")
	waiting := s.outboxRows(failed)

	res := s.run("retry", failed.String(), "--reason", "platform is back")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, failed.String()+": failed -> pending (retried, by alice: platform is back)\n"+
		"the event is published by the next relay round (a running ingest or sweeper drains the outbox)\n", res.stdout)
	require.Equal(t, ledger.Pending, s.intent(failed).State)
	last := s.lastTransition(failed)
	require.Equal(t, "alice", last.Actor, "the operator, not the CLI's ledger actor")
	require.JSONEq(t, `{"note": "platform is back"}`, string(last.Detail))
	require.Equal(t, waiting+1, s.outboxRows(failed), "the transition waits in the outbox for a relay")

	// Park it (pending), flags before the key this time, the operator named by the flag.
	res = s.run("park", "--reason", "customer asked to stop", "--operator", "bob", "--json", failed.String())
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.JSONEq(t, `{"key": "`+failed.String()+`", "state": "parked", "reason": "operator_parked", "actor": "bob",
		"note": "customer asked to stop", "event": "outbox"}`, res.stdout)
	require.Equal(t, ledger.Parked, s.intent(failed).State)
	last = s.lastTransition(failed)
	require.Equal(t, ledger.Pending, last.From)
	require.Equal(t, "bob", last.Actor)

	res = s.run("resolve", failed.String(), "--failed", "--evidence", "the platform has no such post")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, failed.String()+": parked -> failed (operator_failed, by alice: the platform has no such post)\n")
	require.Equal(t, ledger.Failed, s.intent(failed).State)
	require.JSONEq(t, `{"evidence": "the platform has no such post"}`, string(s.lastTransition(failed).Detail))

	unknown := s.indeterminate("did it go?")
	require.Equal(t, cli.ExitOK, s.run("park", unknown.String(), "--reason", "look by hand").code)
	res = s.run("resolve", unknown.String(), "--published", "--object-id", "post-77", "--evidence", "found it on the profile", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.JSONEq(t, `{"key": "`+unknown.String()+`", "from": "parked", "state": "published", "reason": "operator_published", "actor": "alice",
		"note": "found it on the profile", "object_id": "post-77", "event": "outbox"}`, res.stdout)
	in := s.intent(unknown)
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, "post-77", in.ObjectID)
	require.Equal(t, "alice", s.lastTransition(unknown).Actor)
}

// Every refusal exits 1 with a sentence naming the intent's state, and changes nothing.
func TestRefusalsNameTheStateAndChangeNothing(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	pending := s.submit("pending")
	live := s.authorized("in flight")
	published := s.published("done")
	unknown := s.indeterminate("unknown")
	parked := s.parked("parked")
	nobody := "dk1:" + strings.Repeat("ab", 32)
	before := s.ledgerState()

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"retry", unknown.String(), "--reason", "x"}, []string{"is indeterminate", "never retried"}},
		{[]string{"retry", pending.String(), "--reason", "x"}, []string{"is pending", "only a failed intent can be retried"}},
		{[]string{"retry", live.Key.String(), "--reason", "x"}, []string{"is authorized", "only a failed intent can be retried"}},
		{[]string{"retry", published.String(), "--reason", "x"}, []string{"is published", "never moves again"}},
		{[]string{"retry", parked.String(), "--reason", "x"}, []string{"is parked", "resolve it --failed"}},
		{[]string{"park", live.Key.String(), "--reason", "x"}, []string{"is authorized and its worker's lease is live"}},
		{[]string{"park", published.String(), "--reason", "x"}, []string{"is published"}},
		{[]string{"park", parked.String(), "--reason", "x"}, []string{"is already parked", "atmost resolve"}},
		{[]string{"resolve", pending.String(), "--failed", "--evidence", "x"}, []string{"is pending, not parked"}},
		{[]string{"resolve", unknown.String(), "--published", "--object-id", "o", "--evidence", "x"}, []string{"is indeterminate, not parked"}},
		{[]string{"resolve", published.String(), "--failed", "--evidence", "x"}, []string{"is published"}},
		{[]string{"park", nobody, "--reason", "x"}, []string{"no intent has the delivery key " + nobody}},
		{[]string{"retry", nobody, "--reason", "x"}, []string{"no intent has the delivery key"}},
		{[]string{"resolve", nobody, "--failed", "--evidence", "x"}, []string{"no intent has the delivery key"}},
	} {
		res := s.run(tc.args...)
		require.Equal(t, cli.ExitError, res.code, "atmost %q: %s", tc.args, res.stderr)
		require.True(t, strings.HasPrefix(res.stderr, "atmost "+tc.args[0]+": refused: "), "atmost %q: %s", tc.args, res.stderr)
		for _, want := range tc.want {
			require.Contains(t, res.stderr, want, "atmost %q", tc.args)
		}
		require.Contains(t, res.stderr, "othing was changed", "atmost %q", tc.args)
		require.Empty(t, res.stdout)
	}
	require.Equal(t, before, s.ledgerState(), "no refused command changed anything")
}

// At the attempt cap a retry parks the intent (the ledger's rule) and says so: exit 1, the
// JSON shows the state it is in now.
func TestRetryAtTheAttemptCapParksAndSaysSo(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	res := s.run("policy", "set", "--attempt-cap", "1", "--reason", "one try")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	key := s.failed("once only")

	res = s.run("retry", key.String(), "--reason", "try again", "--json")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "has reached its attempt cap, so it was parked (attempts_exhausted) instead of retried")
	require.JSONEq(t, `{"key": "`+key.String()+`", "from": "failed", "state": "parked", "reason": "attempts_exhausted", "actor": "alice",
		"note": "try again", "event": "outbox"}`, res.stdout)
	in := s.intent(key)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonAttemptsExhausted, in.Reason)
	require.Equal(t, "alice", s.lastTransition(key).Actor)
}

// A bad command line exits 2, names the fix, and changes nothing in the ledger.
func TestBadIntentCommandLinesExitWithUsageAndChangeNothing(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	parked := s.parked("parked").String()
	failed := s.failed("failed").String()
	before := s.ledgerState()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"park"}, "Usage:"},
		{[]string{"park", "--reason", "x"}, "give the KEY"},
		{[]string{"park", "dk1:zz", "--reason", "x"}, `"dk1:zz" is not a delivery key`},
		{[]string{"park", parked}, "--reason is required"},
		{[]string{"park", parked, "--reason", " "}, "--reason is required"},
		{[]string{"park", parked, failed, "--reason", "x"}, "unexpected argument"},
		{[]string{"park", parked, "--reason", "x", "--evidence", "e"}, "--evidence: not a flag of park"},
		{[]string{"park", parked, "--no-such-flag"}, "--no-such-flag: not a flag of park"},
		{[]string{"resolve", parked, "--evidence", "e"}, "give --published or --failed"},
		{[]string{"resolve", parked, "--published", "--failed", "--evidence", "e"}, "give --published or --failed"},
		{[]string{"resolve", parked, "--published", "--evidence", "e"}, "--published needs --object-id"},
		{[]string{"resolve", parked, "--failed", "--object-id", "o", "--evidence", "e"}, "contradict"},
		{[]string{"resolve", parked, "--failed"}, "--evidence is required"},
		{[]string{"resolve", parked, "--failed", "--evidence", "e", "--reason", "r"}, "--reason: not a flag of resolve"},
		{[]string{"retry", failed}, "--reason is required"},
		{[]string{"retry", failed, "--reason", "x", "--limit", "3"}, "--limit: not a flag of retry"},
		{[]string{"intents"}, "Usage:"},
		{[]string{"intents", "list"}, `unknown command "list"`},
		{[]string{"intents", "ls", "--state", "lost"}, "pending, authorized, published, failed, indeterminate, parked"},
		{[]string{"intents", "ls", "--state", ""}, "--state is empty"},
		{[]string{"intents", "ls", "--account", ""}, "--account is empty"},
		{[]string{"intents", "ls", "--limit", "0"}, "give 1 to 1000"},
		{[]string{"intents", "ls", "--after", "nope"}, `"nope" is not a delivery key`},
		{[]string{"intents", "ls", "--operator", "x"}, "--operator: not a flag of ls"},
		{[]string{"intents", "show"}, "give the KEY"},
		{[]string{"intents", "show", parked, "--state", "failed"}, "--state: not a flag of show"},
		{[]string{"intents", "show", parked, failed}, "unexpected argument"},
		{[]string{"rejects", "ls", "--reason", "bogus"}, "malformed_json"},
		{[]string{"rejects", "ls", "--limit", "0"}, "give 1 to 1000"},
		{[]string{"rejects", "ls", "extra"}, "unexpected argument"},
	} {
		res := s.run(tc.args...)
		require.Equal(t, cli.ExitUsage, res.code, "atmost %q: %s", tc.args, res.stderr)
		require.Contains(t, res.stderr, tc.want, "atmost %q", tc.args)
	}
	require.Equal(t, before, s.ledgerState(), "no bad command line changed anything")
}

func TestIntentCommandsHelpListsTheirFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		flags, not []string
	}{
		{[]string{"park", "--help"}, []string{"--reason TEXT", "--operator NAME", "--nats-url URL", "--json"}, nil},
		{[]string{"resolve", "-h"}, []string{"--published", "--failed", "--object-id ID", "--evidence TEXT", "--operator NAME", "--nats-url URL"}, []string{"--reason"}},
		{[]string{"retry", "help"}, []string{"--reason TEXT", "--operator NAME", "--nats-url URL"}, nil},
		{[]string{"intents", "ls", "--help"}, []string{"--state S", "--account A", "--reason R", "--since DURATION|TIME", "--until DURATION|TIME", "--sort key|created|updated", "--desc", "--limit N", "--after KEY|TIME,KEY", "--json"}, []string{"--operator"}},
		{[]string{"intents", "show", "--help"}, []string{"--json"}, []string{"--operator", "--reason", "--state"}},
		{[]string{"rejects", "ls", "--help"}, []string{"--reason R", "--limit N", "--json"}, []string{"--operator"}},
		{[]string{"events", "tail", "--help"}, []string{"--subject FILTER", "--since DURATION|TIME", "--follow", "--limit N", "--nats-url URL", "--json"}, []string{"--operator", "--reason", "--database-url"}},
	} {
		res := run(nil, tc.args...)
		require.Equal(t, cli.ExitOK, res.code, "atmost %v", tc.args)
		for _, f := range tc.flags {
			require.Contains(t, res.stdout, "\n  "+f+"\n", "atmost %v", tc.args)
		}
		for _, f := range tc.not {
			require.NotContains(t, res.stdout, "\n  "+f, "atmost %v", tc.args)
		}
	}
	res := run(nil, "help")
	for _, name := range []string{"intents", "park", "resolve", "retry", "rejects", "events", "ATMOST_NATS_URL"} {
		require.Contains(t, res.stdout, name)
	}
}

func TestRejectsLsNewestFirst(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	for i, r := range []ledger.Rejection{
		{Reason: "malformed_json", Detail: "unexpected end of JSON input", Subject: "atmost.intent.acct-1", Stream: "ATMOST_INTENTS", StreamSeq: 7, Raw: []byte("{\"v\":1,\n")},
		{Reason: "unknown_account", Detail: `account "acct-9" is not configured`, Subject: "atmost.intent.acct-9", Stream: "ATMOST_INTENTS", StreamSeq: 8,
			Raw: []byte(`{"v":1,"account":"acct-9"}`), Headers: map[string][]string{"Nats-Msg-Id": {"m8"}}},
	} {
		_, err := s.l.Reject(s.ctx, []ledger.Rejection{r})
		require.NoError(t, err)
		s.exec(`UPDATE rejects SET received_at = now() - make_interval(secs => $1) WHERE stream_seq = $2`, 10-i, r.StreamSeq)
	}

	res := s.run("rejects", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 3, res.stdout)
	require.Regexp(t, `^AT\s+REASON\s+SUBJECT\s+SEQ\s+SIZE\s+DETAIL\s+STARTS WITH$`, lines[0])
	require.Regexp(t, `unknown_account\s+atmost.intent.acct-9\s+8\s+26\s+account "acct-9" is not configured\s+\{"v":1,"account":"acct-9"\}$`, lines[1])
	require.Regexp(t, `malformed_json\s+atmost.intent.acct-1\s+7\s+8\s+unexpected end of JSON input\s+\{"v":1,\\n$`, lines[2], "a newline in the input stays on one line")

	res = s.run("rejects", "ls", "--reason", "unknown_account", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var rejects []struct {
		ID        string
		Reason    string
		StreamSeq int64 `json:"stream_seq"`
		Headers   map[string][]string
		Preview   string
		Size      int
		Truncated bool
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rejects))
	require.Len(t, rejects, 1)
	require.NotEmpty(t, rejects[0].ID)
	require.Equal(t, int64(8), rejects[0].StreamSeq)
	require.Equal(t, []string{"m8"}, rejects[0].Headers["Nats-Msg-Id"])
	require.Equal(t, `{"v":1,"account":"acct-9"}`, rejects[0].Preview)
	require.Equal(t, 26, rejects[0].Size)

	res = s.run("rejects", "ls", "--limit", "1", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rejects))
	require.Len(t, rejects, 1)
	require.Equal(t, "unknown_account", rejects[0].Reason, "the newest")

	res = s.run("rejects", "ls", "--reason", "too_large", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "[]\n", res.stdout)
}

// A refused message's subject and headers may hold any bytes: the table escapes them, and the
// JSON carries them as the ledger stores them (base64: where they are not UTF-8 without NUL),
// so they survive it; the SHA-256 names the whole message.
func TestRejectsLsShowsAnyBytesReadably(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	_, err := s.l.Reject(s.ctx, []ledger.Rejection{{Reason: "malformed_json", Detail: "bad", Subject: "atmost.intent.a\x00\xff", Stream: "ATMOST_INTENTS", StreamSeq: 3,
		Headers: map[string][]string{"K\x00": {"v\xfe", "plain"}}, Raw: []byte("x")}})
	require.NoError(t, err)

	res := s.run("rejects", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, `atmost.intent.a\x00\xff`)

	res = s.run("rejects", "ls", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var rejects []struct {
		Subject string
		Headers map[string][]string
		SHA256  string
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rejects))
	require.Len(t, rejects, 1)
	require.Equal(t, "base64:"+base64.StdEncoding.EncodeToString([]byte("atmost.intent.a\x00\xff")), rejects[0].Subject)
	require.Equal(t, map[string][]string{"base64:" + base64.StdEncoding.EncodeToString([]byte("K\x00")): {"base64:" + base64.StdEncoding.EncodeToString([]byte("v\xfe")), "plain"}},
		rejects[0].Headers)
	require.Equal(t, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", rejects[0].SHA256, "sha256 of x")
}
