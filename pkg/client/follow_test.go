package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
)

// follower runs one Follow in the background and collects what it hands over.
type follower struct {
	mu     sync.Mutex
	got    []events.Event
	cancel context.CancelFunc
	done   chan error
}

func (e *env) follow(cfg client.FollowConfig, fail func(events.Event) error) *follower {
	ctx, cancel := context.WithCancel(e.Ctx)
	f := &follower{cancel: cancel, done: make(chan error, 1)}
	go func() {
		f.done <- e.c.Follow(ctx, cfg, func(_ context.Context, ev events.Event) error {
			if fail != nil {
				if err := fail(ev); err != nil {
					return err
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.got = append(f.got, ev)
			return nil
		})
	}()
	e.T.Cleanup(cancel)
	return f
}

// events waits until n events were handed over, then a little longer for any more, and returns
// them all.
func (f *follower) events(t *testing.T, n int) []events.Event {
	t.Helper()
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.got) >= n
	}, 20*time.Second, 10*time.Millisecond, "%d events handed over", n)
	time.Sleep(300 * time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]events.Event(nil), f.got...)
}

// stop ends Follow and returns what it returned.
func (f *follower) stop(t *testing.T) error {
	t.Helper()
	f.cancel()
	select {
	case err := <-f.done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after its context ended")
		return nil
	}
}

// A follower gets exactly the events of its filter: of its accounts (whatever characters their
// names hold), of its states, or of both.
func TestFollowHandsOverTheEventsOfItsFilterOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	require.NoError(t, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: "a.b*c", Platform: "sim", Settings: json.RawMessage(`{}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	one := e.Submit("acct-1", "one", "two")
	e.Submit("acct-2", "three")
	e.Submit("a.b*c", "four")
	require.NoError(t, e.Ledger.Park(e.Ctx, one[0], ledger.Actor{Name: "test", Reason: "a parked one"}))
	_, err := e.Relay.Drain(e.Ctx)
	require.NoError(t, err)

	for _, c := range []struct {
		cfg  client.FollowConfig
		want map[string]int // account/state -> events
	}{
		{client.FollowConfig{Durable: "acct-1", Accounts: []string{"acct-1"}}, map[string]int{"acct-1/pending": 2, "acct-1/parked": 1}},
		{client.FollowConfig{Durable: "odd", Accounts: []string{"a.b*c"}}, map[string]int{"a.b*c/pending": 1}},
		{client.FollowConfig{Durable: "parked", States: []atmosttype.State{"parked"}}, map[string]int{"acct-1/parked": 1}},
		{client.FollowConfig{Durable: "two-pending", Accounts: []string{"acct-2", "a.b*c"}, States: []atmosttype.State{"pending"}}, map[string]int{"acct-2/pending": 1, "a.b*c/pending": 1}},
		{client.FollowConfig{Durable: "all"}, map[string]int{"acct-1/pending": 2, "acct-1/parked": 1, "acct-2/pending": 1, "a.b*c/pending": 1}},
	} {
		total := 0
		for _, n := range c.want {
			total += n
		}
		f := e.follow(c.cfg, nil)
		got := map[string]int{}
		for _, ev := range f.events(t, total) {
			got[ev.Account+"/"+string(ev.To)]++
		}
		require.Equal(t, c.want, got, c.cfg.Durable)
		require.NoError(t, f.stop(t))
	}
}

// A follower started again under its name resumes after the last event it acknowledged, and
// hands an event over once even when the stream holds it twice (a relay's republication after
// the duplicate window, under another message id).
func TestFollowResumesAfterARestartAndHandsEachEventOverOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	cfg := client.FollowConfig{Durable: "billing", Accounts: []string{"acct-1"}}
	e.Submit("acct-1", "a", "b", "c")
	f := e.follow(cfg, nil)
	first := f.events(t, 3)
	require.Len(t, first, 3)

	// The first event again, as a republication the stream's duplicate window no longer hides.
	stream, err := e.JS.Stream(e.Ctx, events.EventsStream)
	require.NoError(t, err)
	m, err := stream.GetMsg(e.Ctx, 1)
	require.NoError(t, err)
	_, err = e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{m.Header.Get(jetstream.MsgIDHeader) + ":again"}}})
	require.NoError(t, err)
	e.Submit("acct-1", "d")
	got := f.events(t, 4)
	require.Len(t, got, 4, "the copy was not handed over")
	require.NoError(t, f.stop(t))

	// Restarted (a new process would start the same way): only what came since.
	e.Submit("acct-1", "e", "f")
	f = e.follow(cfg, nil)
	again := f.events(t, 2)
	require.Len(t, again, 2)
	seen := map[events.ID]bool{}
	for _, ev := range append(got, again...) {
		require.False(t, seen[ev.ID], "%s handed over twice", ev.ID)
		seen[ev.ID] = true
	}
	require.NoError(t, f.stop(t))
}

// A handler's error ends Follow with it, and the event it failed on is the first the next
// Follow hands over.
func TestFollowReturnsTheHandlersErrorAndStartsWithItsEventNextTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	e.Submit("acct-1", "a", "b", "c")
	cfg := client.FollowConfig{Durable: "picky"}
	boom := errors.New("the downstream store is down")
	var failedOn events.ID
	calls := 0
	f := e.follow(cfg, func(ev events.Event) error {
		if calls++; calls == 2 {
			failedOn = ev.ID
			return boom
		}
		return nil
	})
	select {
	case err := <-f.done:
		require.ErrorIs(t, err, boom)
	case <-time.After(20 * time.Second):
		t.Fatal("Follow did not return the handler's error")
	}
	require.Len(t, f.got, 1)
	handled := f.got[0].ID

	f = e.follow(cfg, nil)
	got := f.events(t, 2)
	require.Len(t, got, 2)
	require.Equal(t, failedOn, got[0].ID)
	require.NotEqual(t, handled, got[1].ID)
	require.NoError(t, f.stop(t))
}

func TestFollowRefusesAFilterThatWouldMatchNothing(t *testing.T) {
	t.Parallel()
	for _, cfg := range []client.FollowConfig{
		{Durable: "x", States: []atmosttype.State{"sent"}},
		{Durable: "x", Accounts: []string{""}},
	} {
		_, err := cfg.Filters()
		require.Error(t, err, "%+v", cfg)
	}
	filters, err := client.FollowConfig{Accounts: []string{"acct-1", "*"}, States: []atmosttype.State{"published"}}.Filters()
	require.NoError(t, err)
	require.Equal(t, []string{"atmost.event.published.acct-1", "atmost.event.published.~Kg"}, filters)
}

// A Follow started again under its name with DeliverNew changed resumes where the consumer
// was, as the option's doc says, instead of failing (JetStream refuses a new start, 10012).
func TestFollowWithDeliverNewChangedKeepsTheConsumersPosition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	e.Submit("acct-1", "a", "b")
	f := e.follow(client.FollowConfig{Durable: "changed", Accounts: []string{"acct-1"}}, nil)
	require.Len(t, f.events(t, 2), 2)
	require.NoError(t, f.stop(t))

	c := e.Submit("acct-1", "c")
	f = e.follow(client.FollowConfig{Durable: "changed", Accounts: []string{"acct-1"}, DeliverNew: true}, nil)
	got := f.events(t, 1)
	require.Len(t, got, 1, "the event published while it was stopped, and only it")
	require.Equal(t, c[0], got[0].Key(), "an event names its key as a receipt and an outcome do")
	require.NoError(t, f.stop(t))
}

// Follow hands each event over as it arrives, not when its fetch ends (a fetch that is not
// filled waits out its second, which held every event back as long): against a plain
// subscription to the same subjects, which sees each event as JetStream stores it, Follow is
// never half a second behind. Eight events 150 ms apart span more than one fetch, so a Follow
// that waited for its fetch's end would hold at least one of them back most of a second.
func TestFollowHandsOverEachEventAsItArrives(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	var mu sync.Mutex
	stored, handled := map[string]time.Time{}, map[string]time.Time{}
	sub, err := e.nc.Subscribe(events.AccountSubjects("acct-1"), func(m *nats.Msg) {
		if ev, err := events.Unmarshal(m.Data); err == nil {
			mu.Lock()
			defer mu.Unlock()
			stored[fmt.Sprint(ev.ID)] = time.Now()
		}
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, e.nc.Flush())

	f := e.follow(client.FollowConfig{Durable: "prompt", Accounts: []string{"acct-1"}}, func(ev events.Event) error {
		mu.Lock()
		defer mu.Unlock()
		handled[fmt.Sprint(ev.ID)] = time.Now()
		return nil
	})
	time.Sleep(300 * time.Millisecond) // Follow is fetching
	const n = 8
	for i := range n {
		e.Submit("acct-1", fmt.Sprintf("as it arrives %d", i))
		time.Sleep(150 * time.Millisecond)
	}
	require.Len(t, f.events(t, n), n)
	require.NoError(t, f.stop(t))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, stored, n, "the subscription saw every event")
	for id, at := range handled {
		behind := at.Sub(stored[id])
		require.Less(t, behind, 500*time.Millisecond, "event %s handed over %s after it was stored", id, behind)
	}
}
