package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Every fault of the simulator, sent through the real adapter, ends in the outcome that
// transport.Outcomes gives its case, and the platform's own count says whether that outcome
// was honest: NotSent only where nothing was created.
func TestEachFaultEndsInTheOutcomeTheTransportTableGives(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		fault      platformsim.Fault
		definitive int
		// The case transport.CaseOf must see. A dropped connection is an error once a
		// connection was held, whether or not the platform read the body: the request's bytes
		// had left, so it is Unknown even when nothing was created.
		want    transport.Case
		created int
	}{
		{"ok", platformsim.FaultOK, 0, transport.CaseSuccessWithID, 1},
		{"drop_before_read", platformsim.FaultDropBeforeRead, 0, transport.CaseErrorAfterConn, 0},
		{"drop_after_read", platformsim.FaultDropAfterRead, 0, transport.CaseErrorAfterConn, 0},
		{"drop_after_commit", platformsim.FaultDropAfterCommit, 0, transport.CaseErrorAfterConn, 1},
		{"error_after_commit", platformsim.FaultErrorAfterCommit, 0, transport.CaseServerError, 1},
		{"delay within the deadline", platformsim.FaultDelay, 0, transport.CaseSuccessWithID, 1},
		{"rate_limited", platformsim.FaultRateLimited, 0, transport.CaseDefinitive, 0},
		{"reject 422", platformsim.FaultReject, 0, transport.CaseDefinitive, 0},
		{"reject 409 is not definitive", platformsim.FaultReject, 409, transport.CaseOther4xx, 0},
		{"reject 503", platformsim.FaultReject, 503, transport.CaseServerError, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, url := startSim(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{c.fault},
				Delay: 50 * time.Millisecond, DefinitiveStatus: c.definitive}})
			a := open(t, url, nil)
			r := request(t, "Hello, "+c.name)
			p, err := a.Prepare(r)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()

			out := a.Send(ctx, p)

			verdict := transport.Outcomes()[c.want]
			require.Equal(t, string(c.want), out.Detail["case"], "detail: %v", out.Detail)
			require.Equal(t, verdict.Result, out.Result)
			require.Equal(t, verdict.Reason, out.Reason)
			require.Equal(t, c.created, s.Created(r.Key.String()))
			require.Equal(t, 1, s.Received(r.Key.String()), "the platform saw exactly one request")
			require.Equal(t, uint64(1), a.client.Requests())
			if out.Result == platform.NotSent {
				require.Zero(t, s.Created(r.Key.String()), "NotSent is only ever reported when nothing was created")
			}
			if out.Result == platform.Sent {
				require.Equal(t, s.Objects(r.Key.String())[0].ID, out.ObjectID)
				obj, err := a.ReadBack(ctx, r, out.ObjectID)
				require.NoError(t, err)
				require.Equal(t, platform.Object{ID: out.ObjectID, Text: r.Text}, obj)
			} else {
				require.Empty(t, out.ObjectID)
			}
		})
	}
}

func TestDelayPastTheDeadlineIsUnknownAndTheObjectAppearsAfterTheDelay(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, platformsim.Config{StatusLookup: true, Plan: platformsim.Plan{
		Script: []platformsim.Fault{platformsim.FaultDelay}, Delay: 400 * time.Millisecond}})
	a := open(t, url, map[string]any{"status_lookup": true})
	r := request(t, "slow")
	p, err := a.Prepare(r)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()

	out := a.Send(ctx, p)
	require.Equal(t, platform.Unknown, out.Result)
	require.Equal(t, platform.ReasonSendUnknown, out.Reason)
	require.Equal(t, string(transport.CaseErrorAfterConn), out.Detail["case"])
	require.Zero(t, s.Created(r.Key.String()), "the platform is still inside its delay")

	lookup := a.Lookup(context.Background(), r)
	require.Equal(t, platform.Unavailable, lookup.Result, "in progress proves nothing yet")
	require.Equal(t, "in_progress", lookup.Detail["answer"])

	require.Eventually(t, func() bool { return s.Created(r.Key.String()) == 1 }, 2*time.Second, 10*time.Millisecond)
	lookup = a.Lookup(context.Background(), r)
	require.Equal(t, platform.Found, lookup.Result)
	require.Equal(t, s.Objects(r.Key.String())[0].ID, lookup.ObjectID)
	require.Equal(t, 1, s.Received(r.Key.String()))
}

func TestConnectionRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	a := open(t, closedURL(t), nil)
	p, err := a.Prepare(request(t, "nobody home"))
	require.NoError(t, err)
	out := a.Send(context.Background(), p)
	require.Equal(t, platform.NotSent, out.Result)
	require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
	require.Equal(t, string(transport.CaseNoConnection), out.Detail["case"])
	require.Contains(t, out.Detail["error"], "connection refused")
}

func TestAnExpiredDeadlineSendsNothing(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	r := request(t, "too late")
	p, err := a.Prepare(r)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := a.Send(ctx, p)
	require.Equal(t, platform.NotSent, out.Result)
	require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
	require.Zero(t, s.Received(r.Key.String()))
}

// net/http replays a request with an Idempotency-Key on a reused connection that died; the
// transport must not, whichever side of the commit the connection died on.
func TestADroppedReusedConnectionIsNeverReplayed(t *testing.T) {
	t.Parallel()
	for _, fault := range []platformsim.Fault{platformsim.FaultDropBeforeRead, platformsim.FaultDropAfterRead,
		platformsim.FaultDropAfterCommit} {
		t.Run(string(fault), func(t *testing.T) {
			t.Parallel()
			s, url := startSim(t, platformsim.Config{Plan: platformsim.Plan{
				Script: []platformsim.Fault{platformsim.FaultOK, fault}}})
			a := open(t, url, nil)
			warm, dropped := request(t, "first"), request(t, "second")
			for _, r := range []platform.Request{warm, dropped} {
				p, err := a.Prepare(r)
				require.NoError(t, err)
				out := a.Send(context.Background(), p)
				if r.Key == warm.Key {
					require.Equal(t, platform.Sent, out.Result)
					continue
				}
				require.Equal(t, true, out.Detail["reused_connection"], "the second send rode the first one's connection")
				require.Equal(t, platform.Unknown, out.Result)
			}
			require.Equal(t, 1, s.Received(dropped.Key.String()))
			require.Equal(t, uint64(2), a.client.Requests())
			require.Equal(t, 2, s.Counts().Requests)
		})
	}
}

func TestSendRefusesAPreparedRequestChangedAfterPrepare(t *testing.T) {
	t.Parallel()
	s, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	p, err := a.Prepare(request(t, "authorized"))
	require.NoError(t, err)

	altered := p
	altered.Body = []byte(`{"text":"something else"}`)
	out := a.Send(context.Background(), altered)
	require.Equal(t, platform.NotSent, out.Result)
	require.Contains(t, out.Detail["error"], "does not match its hash")

	elsewhere := p
	elsewhere.URL = "http://127.0.0.1:1/v1/accounts/acct-42/post"
	elsewhere.Hash = rehash(elsewhere)
	out = a.Send(context.Background(), elsewhere)
	require.Equal(t, platform.NotSent, out.Result)
	require.Contains(t, out.Detail["error"], "is not on "+url)

	require.Zero(t, s.Counts().Requests)
	require.Zero(t, a.client.Requests())
}

func rehash(p platform.Prepared) [32]byte {
	return platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash
}

func TestADoubleSendShowsOnThePlatform(t *testing.T) {
	t.Parallel()
	// The simulator's count is the oracle of every at-most-once test: it must see a resend.
	s, url := startSim(t, platformsim.Config{})
	a := open(t, url, nil)
	r := request(t, "twice")
	p, err := a.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, platform.Sent, a.Send(context.Background(), p).Result)
	require.Equal(t, platform.Sent, a.Send(context.Background(), p).Result)
	require.Equal(t, 2, s.Created(r.Key.String()))
	require.Equal(t, []string{r.Key.String()}, s.Counts().KeysOverOne)
}
