package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// producer publishes the way a careful producer does: every message carries a Nats-Msg-Id
// and is published again (with the same id) until JetStream acknowledges it, across a NATS
// restart. Most messages are new intents; some are the same intent again under a new id (a
// producer that lost track), some bad input.
type producer struct {
	rng      *rand.Rand
	url      string
	keys     map[identity.DeliveryKey]bool // distinct valid intents JetStream acknowledged
	bodies   []string
	produced int
}

var badBodies = []string{
	`{"v":1,"account":"chaos-1","action":"post","request":{"text":"cut short"`,
	`{"v":1,"account":"chaos-2","action":"post","request":{"text":"x"},"extra":true}`,
	`{"v":1,"account":"nobody","action":"post","request":{"text":"an account nobody configured"}}`,
}

func (p *producer) run(ctx context.Context, n int, over time.Duration) error {
	nc, err := nats.Connect(p.url, clientOptions("atmost chaos producer")...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pause := over / time.Duration(max(n/50, 1))
	for i := 0; i < n; i++ {
		var body, account string
		valid := false
		switch roll := p.rng.Float64(); {
		case roll < 0.05 && len(p.bodies) > 0: // the same intent again, under a new message id
			body = p.bodies[p.rng.IntN(len(p.bodies))]
			valid = true
		case roll < 0.08:
			body = badBodies[i%len(badBodies)]
		default:
			account = accounts[p.rng.IntN(len(accounts))]
			body = fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":"chaos %d %d"}}`, account, i, p.rng.IntN(1_000_000_000))
			valid = true
		}
		env, perr := identity.ParseEnvelope([]byte(body))
		subject := events.IntentSubject("chaos-1")
		if perr == nil {
			subject = events.IntentSubject(env.Account)
		}
		if err := p.publish(ctx, js, subject, body, fmt.Sprintf("chaos-%d", i)); err != nil {
			return err
		}
		p.produced++
		if valid && perr == nil {
			p.keys[env.DeliveryKey()] = true
			p.bodies = append(p.bodies, body)
		}
		if i%50 == 49 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
	}
	return nil
}

// publish publishes until JetStream acknowledges, with the same message id every time: a
// retry after an unanswered publish is deduplicated by JetStream, never stored twice.
func (p *producer) publish(ctx context.Context, js jetstream.JetStream, subject, body, id string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.PublishMsg(pctx, &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{jetstream.MsgIDHeader: []string{id}}})
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("message %s not acknowledged for 2 minutes: %w", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
