package console

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Wrong tokens are throttled, at the login form and in a Bearer header alike: each client may
// guess wrong clientGuesses times, then once per clientEvery; all clients together
// totalGuesses times, then once per totalEvery. A client over its limit, or any client while
// the total is spent, is refused with 429 before its token is even compared, so a right token
// sent then does not log in either. A token of CheckToken's strength stays out of reach:
// a guess a minute per client, and at most 43,200 a day in all.
const (
	clientGuesses = 5
	clientEvery   = time.Minute
	totalGuesses  = 100
	totalEvery    = 2 * time.Second
	// maxClients bounds the clients remembered; those with every guess back are forgotten.
	maxClients = 10000
)

type throttle struct {
	mu      sync.Mutex
	clients map[string]*rate.Limiter
	total   *rate.Limiter
}

func newThrottle() *throttle {
	return &throttle{clients: map[string]*rate.Limiter{}, total: rate.NewLimiter(rate.Every(totalEvery), totalGuesses)}
}

// refused reports whether a token from client is refused unread at now, and which limit refuses it:
// "client" or "total".
func (t *throttle) refused(client string, now time.Time) (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.clients[client]; l != nil && l.TokensAt(now) < 1 {
		return true, "client"
	}
	if t.total.TokensAt(now) < 1 {
		return true, "total"
	}
	return false, ""
}

// wrong counts a wrong token from client at now.
func (t *throttle) wrong(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.clients[client]
	if l == nil {
		if len(t.clients) >= maxClients {
			for c, old := range t.clients {
				if old.TokensAt(now) >= clientGuesses {
					delete(t.clients, c)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(clientEvery), clientGuesses)
		t.clients[client] = l
	}
	l.AllowN(now, 1)
	t.total.AllowN(now, 1)
}

// metrics are the console's Prometheus metrics.
type metrics struct {
	logins *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{logins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_console_logins_total",
		Help: "Token checks at the console, by how (form, bearer) and result: ok, wrong (a wrong token), throttled (refused unread: too many wrong ones from the client or in all)."},
		[]string{"how", "result"})}
}

// Collectors are the console's metrics, for a registry.
func (s *Server) Collectors() []prometheus.Collector { return []prometheus.Collector{s.metrics.logins} }
