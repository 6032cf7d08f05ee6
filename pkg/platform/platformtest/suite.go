package platformtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Run checks the contract (see the package comment) against the platforms h opens, one
// subtest per clause, grouped as Capabilities, Prepare, Send, ReadBack, ReadBackMany and
// Lookup. The cases run one after another: a harness may use t.Setenv.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil || h.Request == nil {
		t.Fatal("platformtest: the harness needs Open and Request")
	}
	cases := allCases()
	names := map[string]bool{}
	for _, c := range cases {
		names[c.group+"/"+c.name] = true
	}
	for name := range h.Exceptions {
		if !names[name] {
			t.Errorf("platformtest: Harness.Exceptions names %q, which is no case of the suite", name)
		}
	}
	s := &suite{h: h}
	for _, group := range []string{"Capabilities", "Prepare", "Send", "ReadBack", "ReadBackMany", "Lookup"} {
		t.Run(group, func(t *testing.T) {
			for _, c := range cases {
				if c.group != group {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					if why, ok := h.Exceptions[c.group+"/"+c.name]; ok {
						t.Skipf("known exception of this adapter: %s", why)
					}
					c.run(t, s)
				})
			}
		})
	}
}

type suite struct {
	h   Harness
	seq atomic.Int64
}

type testCase struct {
	group, name string
	run         func(t *testing.T, s *suite)
}

// The messages of the skipped cases name the declaration that rules them out.
const (
	noStatusLookup = "Capabilities().StatusLookup is false: the adapter declares that no lookup of it proves not-sent"
	noReadBack     = "ReadBack answers platform.ErrNoReadBack: the adapter declares that it cannot read objects back"
	readsBack      = "ReadBack reads objects back: there is no missing read-back to declare"
	noManyReader   = "the adapter is no platform.ManyReader: it reads objects back one by one"
	noDefinitive   = "Capabilities().DefinitiveStatuses is empty: the adapter declares no refusal definitive"
)

func allCases() []testCase {
	cs := []testCase{
		{"Capabilities", "are fixed for the adapter's life", capabilitiesAreFixed},
		{"Capabilities", "declare only 4xx statuses definitive", onlyClientErrorsAreDefinitive},
		{"Capabilities", "declare a positive reconcile delay", reconcileDelayIsPositive},
		{"Capabilities", "declare unavailable and auth statuses among the definitive ones, apart", signalStatusesAreDefinitive},

		{"Prepare", "sends nothing", prepareSendsNothing},
		{"Prepare", "renders the same request the same way", prepareIsDeterministic},
		{"Prepare", "hashes the wire fields and keeps the request", prepareHashesTheWire},
		{"Prepare", "renders another delivery key as another wire request", prepareDistinguishesKeys},
		{"Prepare", "holds no credential", prepareHoldsNoCredential},
	}
	for _, e := range endings {
		cs = append(cs, testCase{"Send", e.name, e.check})
	}
	cs = append(cs,
		testCase{"Send", "to an unreachable platform is not sent", sendToUnreachable},
		testCase{"Send", "past its deadline sends nothing", sendPastDeadline},
		testCase{"Send", "of a prepared request changed after Prepare sends nothing", sendOfAlteredPrepared},

		testCase{"ReadBack", "without read-back is declared before any request", readBackDeclaredMissing},
		testCase{"ReadBack", "returns the id and the text the platform holds", readBackReturnsHeldText},
		testCase{"ReadBack", "of an object edited on the platform returns its new text", readBackOfEdited},
		testCase{"ReadBack", "of a deleted object is not found", readBackOfDeleted},
		testCase{"ReadBack", "of an unreachable platform is an error, never not found", readBackOfUnreachable},

		testCase{"ReadBackMany", "answers each item as ReadBack would", readBackManyLikeReadBack},
		testCase{"ReadBackMany", "of an unreachable platform fails every item, never as not found", readBackManyOfUnreachable},

		testCase{"Lookup", "of a request never sent finds nothing, not another request's object", lookupOfNeverSent},
		testCase{"Lookup", "with a status lookup proves a request never sent not sent", lookupProvesNeverSent},
		testCase{"Lookup", "of a sent request finds its object", lookupOfSent},
		testCase{"Lookup", "of a deleted object never proves not sent", lookupOfDeleted},
		testCase{"Lookup", "of an unreachable platform is unavailable", lookupOfUnreachable},
	)
	return cs
}

// ending is one way the platform answers a create, and the case of the transport's table
// (transport.Outcomes) it is.
type ending struct {
	answer Answer
	name   string
	// kind is the ending's case for an adapter that declares caps.
	kind func(caps platform.Capabilities) transport.Case
	// commits: the platform creates the object. reads: it reads the whole request.
	commits, reads bool
}

func always(c transport.Case) func(platform.Capabilities) transport.Case {
	return func(platform.Capabilities) transport.Case { return c }
}

var endings = []ending{
	{Accept, "answered with a success naming the object is sent, with that object's id",
		always(transport.CaseSuccessWithID), true, true},
	{DropBeforeRead, "dropped before the platform read it is unknown, and not retried",
		always(transport.CaseErrorAfterConn), false, false},
	{DropAfterCommit, "dropped after the platform committed it is unknown, and not retried",
		always(transport.CaseErrorAfterConn), true, true},
	{ErrorAfterCommit, "answered with a 5xx after the commit is unknown, and not retried",
		always(transport.CaseServerError), true, true},
	{RateLimit, "answered with 429 is not retried, and not sent only when 429 is declared definitive",
		func(c platform.Capabilities) transport.Case {
			if slices.Contains(c.DefinitiveStatuses, 429) {
				return transport.CaseDefinitive
			}
			return transport.CaseOther4xx
		}, false, true},
	{Refuse, "refused with a status declared definitive is not sent",
		always(transport.CaseDefinitive), false, true},
	{RefuseUndeclared, "refused with a 4xx not declared definitive is unknown",
		always(transport.CaseOther4xx), false, true},
	{Redirect, "answered with a redirect is unknown, and the redirect is never followed",
		always(transport.CaseRedirect), false, false},
	{SuccessWithoutID, "answered with a success naming no object is unknown",
		always(transport.CaseSuccessWithoutID), true, true},
	{Slow, "answered after its deadline is unknown, and not retried",
		always(transport.CaseErrorAfterConn), true, true},
}

// wait bounds every call of the suite but the Slow send.
const wait = 10 * time.Second

func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) open(t *testing.T) (platform.Adapter, Platform) {
	t.Helper()
	ad, pl := s.h.Open(t)
	if ad == nil || pl == nil {
		t.Fatal("platformtest: Harness.Open returned no adapter or no platform")
	}
	return ad, pl
}

// request is the harness's request for text, made unique to the run: each is another intent.
func (s *suite) request(t *testing.T, text string) platform.Request {
	t.Helper()
	return s.h.Request(t, fmt.Sprintf("%s (%d)", text, s.seq.Add(1)))
}

func (s *suite) prepare(t *testing.T, ad platform.Adapter, r platform.Request) platform.Prepared {
	t.Helper()
	p, err := ad.Prepare(r)
	if err != nil {
		t.Fatalf("Prepare of the harness's request: %v", err)
	}
	return p
}

// sent sends r to a platform answering Accept and requires Sent.
func (s *suite) sent(t *testing.T, ad platform.Adapter, pl Platform, r platform.Request) platform.Outcome {
	t.Helper()
	out := ad.Send(bounded(t, wait), s.prepare(t, ad, r))
	if out.Result != platform.Sent {
		t.Fatalf("a send the platform answered normally (Accept) ended %s (%s): %v", out.Result, out.Reason, out.Detail)
	}
	s.clean(t, pl, "the outcome of a send", out)
	return out
}

// clean fails when what the adapter returned shows one of the platform's secrets.
func (s *suite) clean(t *testing.T, pl Platform, what string, v any) {
	t.Helper()
	var texts []string
	switch v := v.(type) {
	case error:
		// What an error shows is its text: that is what logs and evidence keep.
		texts = []string{v.Error(), fmt.Sprintf("%+v", v)}
	case platform.Prepared:
		texts = []string{fmt.Sprintf("%#v", v), string(v.Body)}
	default:
		texts = []string{fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v)}
		if b, err := json.Marshal(v); err == nil {
			texts = append(texts, string(b))
		}
	}
	for _, secret := range pl.Secrets() {
		if secret == "" {
			continue
		}
		for _, text := range texts {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows a secret of the platform (the credential or a token it issued)", what)
				return
			}
		}
	}
}

// checkShape fails when out is not well formed: Sent names an object and gives no reason;
// NotSent and Unknown name none and give a reason of their own.
func checkShape(t *testing.T, out platform.Outcome) {
	t.Helper()
	switch out.Result {
	case platform.Sent:
		if out.ObjectID == "" {
			t.Errorf("Sent without an object id: a success that names no object is Unknown")
		}
		if out.Reason != "" {
			t.Errorf("Sent with the reason %q", out.Reason)
		}
	case platform.NotSent:
		if out.ObjectID != "" {
			t.Errorf("NotSent names the object %q", out.ObjectID)
		}
		if out.Reason != platform.ReasonConnectionFailed && out.Reason != platform.ReasonPlatformRejected {
			t.Errorf("NotSent with the reason %q: want %s or %s", out.Reason, platform.ReasonConnectionFailed, platform.ReasonPlatformRejected)
		}
	case platform.Unknown:
		if out.ObjectID != "" {
			t.Errorf("Unknown names the object %q", out.ObjectID)
		}
		if out.Reason != platform.ReasonSendUnknown {
			t.Errorf("Unknown with the reason %q: want %s", out.Reason, platform.ReasonSendUnknown)
		}
	default:
		t.Errorf("the result %q is none of Sent, NotSent, Unknown", out.Result)
	}
}

// checkLookup holds lk against the platform's truth for r: held says whether the platform
// still holds the request's object and answers normally.
func (s *suite) checkLookup(t *testing.T, caps platform.Capabilities, pl Platform, r platform.Request, lk platform.Lookup, held bool) {
	t.Helper()
	created := pl.Objects(r)
	if lk.ProvenNotSent && lk.Result != platform.NotFound {
		t.Errorf("ProvenNotSent with %s: only a NotFound can prove not-sent", lk.Result)
	}
	switch lk.Result {
	case platform.Found:
		if lk.ObjectID == "" {
			t.Errorf("Found without an object id")
		} else if !slices.Contains(created, lk.ObjectID) {
			t.Errorf("Found names %q, which the request did not create (it created %q)", lk.ObjectID, created)
		}
	case platform.NotFound:
		if lk.ObjectID != "" {
			t.Errorf("NotFound names the object %q", lk.ObjectID)
		}
		if held {
			t.Errorf("NotFound, but the platform holds %q for the request and answers normally: a false claim", created)
		}
		if lk.ProvenNotSent && !caps.StatusLookup {
			t.Errorf("ProvenNotSent from an adapter that declares no StatusLookup")
		}
		if lk.ProvenNotSent && len(created) > 0 {
			t.Errorf("ProvenNotSent, but the request created %q", created)
		}
	case platform.Unavailable:
		if lk.ObjectID != "" {
			t.Errorf("Unavailable names the object %q", lk.ObjectID)
		}
	default:
		t.Errorf("the lookup result %q is none of Found, NotFound, Unavailable", lk.Result)
	}
	s.clean(t, pl, "a lookup", lk)
}

// creates requires that the platform received n create requests in all.
func creates(t *testing.T, pl Platform, n int, why string) {
	t.Helper()
	if got := len(pl.Creates()); got != n {
		t.Errorf("the platform received %d create requests, want %d: %s", got, n, why)
	}
}

func capabilitiesAreFixed(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	first := ad.Capabilities()
	want := first
	want.DefinitiveStatuses = slices.Clone(first.DefinitiveStatuses)
	if len(first.DefinitiveStatuses) > 0 {
		first.DefinitiveStatuses[0] = 200
	}
	if got := ad.Capabilities(); !reflect.DeepEqual(got, want) {
		t.Errorf("Capabilities changed: %+v after %+v (a caller changed the slice it was given)", got, want)
	}
}

func onlyClientErrorsAreDefinitive(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	seen := map[int]bool{}
	for _, status := range ad.Capabilities().DefinitiveStatuses {
		if status < 400 || status > 499 {
			t.Errorf("%d is declared definitive: only a 4xx can prove the platform created nothing", status)
		}
		if seen[status] {
			t.Errorf("%d is declared definitive twice", status)
		}
		seen[status] = true
	}
}

func reconcileDelayIsPositive(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	if d := ad.Capabilities().ReconcileDelay; d <= 0 {
		t.Errorf("ReconcileDelay is %s: a request still inside the platform at the deadline would be looked up before it landed", d)
	}
}

func prepareSendsNothing(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r := s.request(t, "prepared, never sent")
	s.prepare(t, ad, r)
	s.prepare(t, ad, r)
	if n := pl.Requests(); n != 0 {
		t.Errorf("Prepare made %d requests to the platform: it must render the request without a network call", n)
	}
}

func prepareIsDeterministic(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	r := s.request(t, "prepared twice")
	p1, p2 := s.prepare(t, ad, r), s.prepare(t, ad, r)
	if p1.Hash != p2.Hash || !reflect.DeepEqual(p1, p2) {
		t.Errorf("two Prepares of one request differ:\n%s %s %v\n%s\n%s %s %v\n%s",
			p1.Method, p1.URL, p1.Header, p1.Body, p2.Method, p2.URL, p2.Header, p2.Body)
	}
}

func prepareHashesTheWire(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	r := s.request(t, "hashed")
	p := s.prepare(t, ad, r)
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash {
		t.Errorf("the hash is not platform.NewPrepared's over the wire fields: the ledger would bind another request than the one sent")
	}
	if !reflect.DeepEqual(p.Request, r) {
		t.Errorf("the Prepared carries %+v, not the request it was made from (%+v)", p.Request, r)
	}
}

func prepareDistinguishesKeys(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	r1, r2 := s.request(t, "one intent"), s.request(t, "another intent")
	if r1.Key == r2.Key {
		t.Fatalf("Harness.Request gave two texts the same delivery key %s", r1.Key)
	}
	if s.prepare(t, ad, r1).Hash == s.prepare(t, ad, r2).Hash {
		t.Errorf("two intents with distinct delivery keys prepare the same hash")
	}
}

func prepareHoldsNoCredential(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	s.clean(t, pl, "the prepared request", s.prepare(t, ad, s.request(t, "no credential")))
}

// check sends, after a warm-up send that leaves a connection to reuse, one request the
// platform answers with e.answer, and holds the outcome, the platform's count of creates, its
// objects and one lookup to the contract.
func (e ending) check(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	caps := ad.Capabilities()
	if e.answer == Refuse && len(caps.DefinitiveStatuses) == 0 {
		t.Skip(noDefinitive)
	}
	// The warm-up leaves an idle connection (and, for an adapter that logs in, a session): the
	// send below rides it, which is where net/http would replay a request on its own.
	s.sent(t, ad, pl, s.request(t, "the warm-up"))

	r := s.request(t, "the send")
	p := s.prepare(t, ad, r)
	pl.Next(e.answer)
	deadline := wait
	if e.answer == Slow {
		deadline = SlowBy / 4
	}
	out := ad.Send(bounded(t, deadline), p)
	checkShape(t, out)
	s.clean(t, pl, "the outcome", out)
	kind := e.kind(caps)
	if want := transport.Outcomes()[kind]; out.Result != want.Result || out.Reason != want.Reason {
		t.Errorf("the send ended %s (%s), want %s (%s): the transport's table for %q; detail: %v",
			out.Result, out.Reason, want.Result, want.Reason, kind, out.Detail)
	}
	if want := caps.Signal(out); out.Signal != want {
		t.Errorf("the send's signal is %q, want %q: what its capabilities declare of the outcome (%s, status %v)", out.Signal, want, out.Result, out.Detail["status"])
	}

	got := pl.Creates()
	creates(t, pl, 2, "one for the warm-up and exactly one for the send: no retry, no redirect followed")
	if len(got) == 2 && got[1] != nil && (e.reads || len(got[1]) == len(p.Body)) && !bytes.Equal(got[1], p.Body) {
		t.Errorf("the platform received another body than the prepared one:\n got %s\nwant %s", got[1], p.Body)
	}
	if e.reads && len(got) == 2 && got[1] == nil {
		t.Errorf("the platform read no body for a request it answers after reading it (the harness's Creates is wrong)")
	}

	if e.commits && e.answer == Slow {
		// The platform commits SlowBy after the request arrived, after the send gave up.
		until := time.Now().Add(wait)
		for len(pl.Objects(r)) == 0 && time.Now().Before(until) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	created := pl.Objects(r)
	if e.commits && len(created) != 1 || !e.commits && len(created) != 0 {
		t.Errorf("the platform created %q for a send it answered with %s (the harness does not play it)", created, e.answer)
	}
	if out.Result == platform.NotSent && len(created) != 0 {
		t.Errorf("NotSent, but the platform created %q", created)
	}
	if out.Result == platform.Sent && !slices.Contains(created, out.ObjectID) {
		t.Errorf("Sent names %q, but the platform created %q", out.ObjectID, created)
	}

	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, caps, pl, r, lk, e.commits)
	creates(t, pl, 2, "a lookup creates nothing")
}

func sendToUnreachable(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	p := s.prepare(t, ad, s.request(t, "nobody home"))
	pl.Down()
	out := ad.Send(bounded(t, wait), p)
	checkShape(t, out)
	s.clean(t, pl, "the outcome", out)
	if want := transport.Outcomes()[transport.CaseNoConnection]; out.Result != want.Result || out.Reason != want.Reason {
		t.Errorf("a send to a platform that refuses every connection ended %s (%s), want %s (%s); detail: %v",
			out.Result, out.Reason, want.Result, want.Reason, out.Detail)
	}
	if out.Signal != platform.SignalUnavailable {
		t.Errorf("a send to a platform that refuses every connection signals %q, want %q: its account must hold, not spend attempts", out.Signal, platform.SignalUnavailable)
	}
}

func signalStatusesAreDefinitive(t *testing.T, s *suite) {
	ad, _ := s.open(t)
	caps := ad.Capabilities()
	for _, st := range append(slices.Clone(caps.UnavailableStatuses), caps.AuthStatuses...) {
		if !slices.Contains(caps.DefinitiveStatuses, st) {
			t.Errorf("%d is declared unavailable or auth but not definitive: a send it answers is unknown, which says nothing of the platform", st)
		}
	}
	for _, st := range caps.AuthStatuses {
		if slices.Contains(caps.UnavailableStatuses, st) {
			t.Errorf("%d is declared both unavailable and auth: give it one meaning", st)
		}
	}
}

func sendPastDeadline(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	s.sent(t, ad, pl, s.request(t, "the warm-up"))
	before := pl.Requests()
	p := s.prepare(t, ad, s.request(t, "too late"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := ad.Send(ctx, p)
	checkShape(t, out)
	if out.Result != platform.NotSent {
		t.Errorf("a send whose context had ended ended %s (%s), want %s: nothing may be sent after the deadline; detail: %v",
			out.Result, out.Reason, platform.NotSent, out.Detail)
	}
	if n := pl.Requests() - before; n != 0 {
		t.Errorf("a send whose context had ended made %d requests to the platform", n)
	}
	creates(t, pl, 1, "only the warm-up")
}

func sendOfAlteredPrepared(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	p := s.prepare(t, ad, s.request(t, "authorized"))
	p.Body = append(bytes.Clone(p.Body), ' ')
	out := ad.Send(bounded(t, wait), p)
	checkShape(t, out)
	if out.Result != platform.NotSent {
		t.Errorf("a prepared request whose body no longer matches its hash ended %s (%s), want %s: what was authorized is what is sent",
			out.Result, out.Reason, platform.NotSent)
	}
	creates(t, pl, 0, "a prepared request that does not match its hash is not sent at all")
}

// readable sends a request, then reads its object back, skipping the case when the adapter
// declares no read-back.
func (s *suite) readable(t *testing.T, ad platform.Adapter, pl Platform, text string) (platform.Request, platform.Outcome) {
	t.Helper()
	r := s.request(t, text)
	out := s.sent(t, ad, pl, r)
	if _, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID); errors.Is(err, platform.ErrNoReadBack) {
		t.Skip(noReadBack)
	}
	return r, out
}

func readBackDeclaredMissing(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r := s.request(t, "not readable")
	out := s.sent(t, ad, pl, r)
	before := pl.Requests()
	_, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID)
	if !errors.Is(err, platform.ErrNoReadBack) {
		t.Skip(readsBack)
	}
	if _, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID+"-another"); !errors.Is(err, platform.ErrNoReadBack) {
		t.Errorf("ReadBack answers ErrNoReadBack for one object and %v for another: a missing read-back is declared for every object", err)
	}
	if n := pl.Requests() - before; n != 0 {
		t.Errorf("a ReadBack that cannot read made %d requests to the platform", n)
	}
	s.clean(t, pl, "the read-back's error", err)
}

func readBackReturnsHeldText(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r, out := s.readable(t, ad, pl, `Conformance: "quoted", <tagged> & é`)
	obj, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID)
	switch {
	case err != nil:
		t.Errorf("ReadBack of the object just sent: %v", err)
	case obj.ID != out.ObjectID:
		t.Errorf("ReadBack of %q returned the object %q", out.ObjectID, obj.ID)
	case !identity.SameText(obj.Text, r.Text):
		t.Errorf("ReadBack returned the text %q, the platform holds %q", obj.Text, r.Text)
	}
	creates(t, pl, 1, "reads create nothing")
}

func readBackOfEdited(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r, out := s.readable(t, ad, pl, "the text as sent")
	edited := "edited on the platform since: " + r.Text
	pl.Edit(out.ObjectID, edited)
	obj, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID)
	switch {
	case err != nil:
		t.Errorf("ReadBack of an edited object: %v", err)
	case obj.Text != edited:
		t.Errorf("ReadBack returned the text %q, the platform holds %q: a read-back reports what the platform holds, never the request", obj.Text, edited)
	case identity.SameText(obj.Text, r.Text):
		t.Errorf("the edited text reads as the request's: the mismatch would go unseen")
	}
}

func readBackOfDeleted(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r, out := s.readable(t, ad, pl, "deleted after the send")
	pl.Delete(out.ObjectID)
	_, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID)
	if !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("ReadBack of a deleted object answered %v, want platform.ErrNotFound", err)
	}
	if err != nil {
		s.clean(t, pl, "the read-back's error", err)
	}
}

func readBackOfUnreachable(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r, out := s.readable(t, ad, pl, "read while the platform is down")
	pl.Down()
	_, err := ad.ReadBack(bounded(t, wait), r, out.ObjectID)
	switch {
	case err == nil:
		t.Errorf("ReadBack of a platform that refuses every connection succeeded")
	case errors.Is(err, platform.ErrNotFound):
		t.Errorf("ReadBack of a platform that refuses every connection answered not found (%v): a failed read is no answer", err)
	default:
		s.clean(t, pl, "the read-back's error", err)
	}
}

// many sends three requests, edits the second's object and deletes the third's, and returns
// read items in a mixed order, with an object read twice.
func (s *suite) many(t *testing.T) (platform.Adapter, Platform, platform.ManyReader, []platform.ReadItem) {
	t.Helper()
	ad, pl := s.open(t)
	mr, ok := ad.(platform.ManyReader)
	if !ok {
		t.Skip(noManyReader)
	}
	var items []platform.ReadItem
	for i, text := range []string{"grouped, as sent", "grouped, edited", "grouped, deleted"} {
		var r platform.Request
		var out platform.Outcome
		if i == 0 {
			r, out = s.readable(t, ad, pl, text)
		} else {
			r = s.request(t, text)
			out = s.sent(t, ad, pl, r)
		}
		items = append(items, platform.ReadItem{Request: r, ObjectID: out.ObjectID})
	}
	pl.Edit(items[1].ObjectID, "edited on the platform since")
	pl.Delete(items[2].ObjectID)
	return ad, pl, mr, []platform.ReadItem{items[2], items[0], items[1], items[0]}
}

func readBackManyLikeReadBack(t *testing.T, s *suite) {
	ad, pl, mr, items := s.many(t)
	got := mr.ReadBackMany(bounded(t, wait), items)
	if len(got) != len(items) {
		t.Fatalf("ReadBackMany returned %d results for %d items", len(got), len(items))
	}
	for i, it := range items {
		obj, err := ad.ReadBack(bounded(t, wait), it.Request, it.ObjectID)
		g := got[i]
		switch {
		case (err == nil) != (g.Err == nil):
			t.Errorf("item %d (%s): ReadBackMany answered %v, ReadBack %v", i, it.ObjectID, g.Err, err)
		case errors.Is(err, platform.ErrNotFound) != errors.Is(g.Err, platform.ErrNotFound):
			t.Errorf("item %d (%s): ReadBackMany answered %v, ReadBack %v", i, it.ObjectID, g.Err, err)
		case err == nil && g.Object != obj:
			t.Errorf("item %d (%s): ReadBackMany read %+v, ReadBack %+v", i, it.ObjectID, g.Object, obj)
		}
	}
	if !errors.Is(got[0].Err, platform.ErrNotFound) {
		t.Errorf("the deleted object read back as %+v, %v: want platform.ErrNotFound", got[0].Object, got[0].Err)
	}
	for _, i := range []int{1, 3} {
		if got[i].Err != nil || got[i].Object.ID != items[i].ObjectID || !identity.SameText(got[i].Object.Text, items[i].Request.Text) {
			t.Errorf("item %d read back as %+v, %v: want %q with the text %q", i, got[i].Object, got[i].Err, items[i].ObjectID, items[i].Request.Text)
		}
	}
	if got[2].Err != nil || got[2].Object.Text != "edited on the platform since" {
		t.Errorf("the edited object read back as %+v, %v: want the text the platform holds", got[2].Object, got[2].Err)
	}
	creates(t, pl, 3, "reads create nothing")
}

func readBackManyOfUnreachable(t *testing.T, s *suite) {
	_, pl, mr, items := s.many(t)
	pl.Down()
	for i, g := range mr.ReadBackMany(bounded(t, wait), items) {
		if g.Err == nil || errors.Is(g.Err, platform.ErrNotFound) {
			t.Errorf("item %d of a grouped read of a platform that refuses every connection answered %+v, %v: want an error other than not found", i, g.Object, g.Err)
		}
	}
}

// neighbour sends another request of the account first: a lookup must tell the objects of
// one request from another's.
func (s *suite) neighbour(t *testing.T, ad platform.Adapter, pl Platform) {
	t.Helper()
	s.sent(t, ad, pl, s.request(t, "another intent of the account"))
}

func lookupOfNeverSent(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	s.neighbour(t, ad, pl)
	r := s.request(t, "never sent")
	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, ad.Capabilities(), pl, r, lk, false)
	if lk.Result == platform.Found {
		t.Errorf("a request never sent was found")
	}
	creates(t, pl, 1, "only the other intent's: a lookup creates nothing")
}

func lookupProvesNeverSent(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	if !ad.Capabilities().StatusLookup {
		t.Skip(noStatusLookup)
	}
	s.neighbour(t, ad, pl)
	r := s.request(t, "never sent, looked up")
	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, ad.Capabilities(), pl, r, lk, false)
	if lk.Result != platform.NotFound || !lk.ProvenNotSent {
		t.Errorf("the status lookup of a key the platform never received answered %s (proven not sent: %t), want NotFound proven: "+
			"an adapter that declares StatusLookup proves not-sent; detail: %v", lk.Result, lk.ProvenNotSent, lk.Detail)
	}
}

func lookupOfSent(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	s.neighbour(t, ad, pl)
	r := s.request(t, "sent, looked up")
	out := s.sent(t, ad, pl, r)
	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, ad.Capabilities(), pl, r, lk, true)
	if lk.Result == platform.Found && lk.ObjectID != out.ObjectID {
		t.Errorf("the lookup found %q, the send created %q", lk.ObjectID, out.ObjectID)
	}
	if lk.Result == platform.Unavailable && len(lk.Detail) == 0 {
		t.Errorf("the lookup of an object the platform holds answered Unavailable without saying why (Detail is empty)")
	}
	creates(t, pl, 2, "a lookup creates nothing")
}

func lookupOfDeleted(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	s.neighbour(t, ad, pl)
	r := s.request(t, "sent, deleted, looked up")
	out := s.sent(t, ad, pl, r)
	pl.Delete(out.ObjectID)
	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, ad.Capabilities(), pl, r, lk, false)
	if lk.ProvenNotSent {
		t.Errorf("a deleted object's lookup proved not-sent: the request created %q", pl.Objects(r))
	}
}

func lookupOfUnreachable(t *testing.T, s *suite) {
	ad, pl := s.open(t)
	r := s.request(t, "looked up while the platform is down")
	pl.Down()
	lk := ad.Lookup(bounded(t, wait), r)
	s.checkLookup(t, ad.Capabilities(), pl, r, lk, false)
	if lk.Result != platform.Unavailable {
		t.Errorf("the lookup of a platform that refuses every connection answered %s, want %s", lk.Result, platform.Unavailable)
	}
}
