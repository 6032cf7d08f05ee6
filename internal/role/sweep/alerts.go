package sweep

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
)

// The sweeper tells someone (docs/design.md#alerts): each pass reads the health changes and the
// parks recorded since its last look, and publishes one events.Alert for each trip, heal and
// park on atmost.alert.<kind>.<account-token> and, when a URL is configured, POSTs it there,
// signed. The sweeper does it because it already reads the ledger on a timer, one pass at a
// time, away from the send path: nothing an alert does can slow or stop a send.

// SignatureHeader carries the HMAC-SHA256 of an alert webhook's body, "sha256=<hex>", keyed
// with the deployment's ATMOST_ALERT_SECRET.
const SignatureHeader = "Atmost-Signature"

// Sign is the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// alerter publishes alerts and queues them for the webhook. The queue is bounded: when the
// webhook cannot keep up, an alert is dropped and counted (atmost_alert_webhook_total{result=
// "dropped"}), never waited for.
type alerter struct {
	nc     *nats.Conn
	url    string
	secret []byte
	client *http.Client
	queue  chan []byte
	log    *zap.Logger
	// since is how far the ledger was read: the recorded time of the last fact told.
	since   time.Time
	alerts  *prometheus.CounterVec
	webhook *prometheus.CounterVec
	dropped atomic.Int64
	// tries and pause bound the webhook's retries of one alert.
	tries int
	pause time.Duration
}

func newAlerter(nc *nats.Conn, cfg Config, log *zap.Logger) *alerter {
	return &alerter{
		nc: nc, url: cfg.AlertURL, secret: []byte(cfg.AlertSecret), log: log,
		client: &http.Client{Timeout: 10 * time.Second},
		queue:  make(chan []byte, cfg.AlertQueue),
		since:  time.Now(),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_alerts_total",
			Help: "Alerts told, by kind: held, healed, parked."}, []string{"kind"}),
		webhook: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_alert_webhook_total",
			Help: "Alerts POSTed to ATMOST_ALERT_URL, by result: sent, failed (every retry failed), dropped (the bounded queue was full)."}, []string{"result"}),
		tries: 5, pause: time.Second,
	}
}

// tell reads what happened since the last look and tells it.
func (a *alerter) tell(ctx context.Context, l Ledger, max int) error {
	changes, err := l.HealthChangesSince(ctx, a.since, max)
	if err != nil {
		return err
	}
	parked, err := l.ParkedSince(ctx, a.since, max)
	if err != nil {
		return err
	}
	var out []events.Alert
	for _, c := range changes {
		al := events.Alert{V: events.AlertVersion, ID: "alert:health:" + c.ID, Account: c.Account, At: c.At,
			State: string(c.To), From: string(c.From), Actor: c.Actor}
		switch {
		case c.From == ledger.Serving && c.To == ledger.Holding:
			al.Kind, al.Cause, al.NextProbe = events.AlertHeld, c.Cause, c.NextProbe
		case c.To == ledger.Serving:
			al.Kind, al.Why = events.AlertHealed, c.Reason
		default:
			continue // a probe's coming and going is not news
		}
		out = append(out, al)
	}
	for _, p := range parked {
		key := p.Key
		out = append(out, events.Alert{V: events.AlertVersion, ID: fmt.Sprintf("alert:parked:%s:%d", p.Key, p.Seq), Kind: events.AlertParked,
			Account: p.Account, At: p.At, DeliveryKey: &key, Reason: p.Reason})
	}
	for _, c := range changes {
		a.since = maxTime(a.since, c.At)
	}
	for _, p := range parked {
		a.since = maxTime(a.since, p.At)
	}
	for _, al := range out {
		a.publish(al)
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// publish sends al on NATS and queues it for the webhook; neither waits for a consumer.
func (a *alerter) publish(al events.Alert) {
	body, err := json.Marshal(al)
	if err != nil {
		a.log.Error("an alert does not encode", zap.Error(err))
		return
	}
	a.alerts.WithLabelValues(al.Kind).Inc()
	a.log.Info("alert", zap.String("kind", al.Kind), zap.String("account", al.Account), zap.String("id", al.ID))
	if a.nc != nil {
		msg := nats.NewMsg(al.Subject())
		msg.Data = body
		msg.Header.Set(nats.MsgIdHdr, al.ID)
		if err := a.nc.PublishMsg(msg); err != nil {
			a.log.Warn("publishing an alert failed", zap.String("id", al.ID), zap.Error(err))
		}
	}
	if a.url == "" {
		return
	}
	select {
	case a.queue <- body:
	default:
		a.webhook.WithLabelValues("dropped").Inc()
		a.dropped.Add(1)
		a.log.Warn("the alert webhook's queue is full: alert dropped", zap.String("id", al.ID))
	}
}

// run POSTs the queued alerts until ctx ends, each retried with a doubling pause.
func (a *alerter) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case body := <-a.queue:
			if a.post(ctx, body) {
				a.webhook.WithLabelValues("sent").Inc()
			} else {
				a.webhook.WithLabelValues("failed").Inc()
			}
		}
	}
}

func (a *alerter) post(ctx context.Context, body []byte) bool {
	pause := a.pause
	for try := 1; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
		if err != nil {
			a.log.Error("the alert webhook's URL is unusable", zap.Error(err))
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(SignatureHeader, Sign(a.secret, body))
		resp, err := a.client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode >= 200 && resp.StatusCode < 300 {
				return true
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if try >= a.tries {
			a.log.Warn("the alert webhook refused an alert; given up", zap.Int("tries", try), zap.Error(err))
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause *= 2
	}
}
