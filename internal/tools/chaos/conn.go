package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/tools/chaos/faultproxy"
	"github.com/atmost/atmost/pkg/ledger"
)

// The connection faults' rates, per moment each applies to (every COMMIT, every statement in
// a transaction, every publish or message): enough that a short run meets every fault several
// times, few enough that the roles do their work between them.
var (
	postgresFaults = map[faultproxy.Fault]float64{
		faultproxy.CutAfterCommit: 0.02, faultproxy.CutBeforeCommit: 0.02, faultproxy.StallBeforeCommit: 0.003,
		faultproxy.StallAfterCommit: 0.003, faultproxy.Reset: 0.005, faultproxy.Delay: 0.02}
	natsFaults = map[faultproxy.Fault]float64{
		faultproxy.CutAfterPublish: 0.005, faultproxy.CutAfterMessage: 0.005, faultproxy.Stall: 0.0005,
		faultproxy.Reset: 0.001, faultproxy.Delay: 0.01}
)

// platformParks are the reasons the platform simulator's faults park an intent for: an unknown
// outcome whose one lookup found nothing on an account without a status lookup, refusals
// retried up to the attempt cap. Any other reason, on an intent whose object is on the
// platform, is the connections' doing when they are the only other fault of the run.
var platformParks = map[string]bool{string(ledger.ReasonReconcileNotFound): true, string(ledger.ReasonAttemptsExhausted): true}

// startProxies puts a fault proxy in front of the ledger and one in front of the NATS server,
// and returns the URLs the roles are given instead of theirs.
func (r *run) startProxies() (dbURL, natsURL string, err error) {
	u, err := url.Parse(r.opts.AppDatabaseURL)
	if err != nil {
		return "", "", err
	}
	if r.pgProxy, err = faultproxy.Start(faultproxy.Postgres, u.Host, faultproxy.Plan{Seed: uint64(r.opts.Seed), Rates: postgresFaults}); err != nil {
		return "", "", err
	}
	u.Host = r.pgProxy.Addr()
	n, err := url.Parse(r.nats[0].url)
	if err != nil {
		return "", "", err
	}
	if r.natsProxy, err = faultproxy.Start(faultproxy.NATS, n.Host, faultproxy.Plan{Seed: uint64(r.opts.Seed) + 1, Rates: natsFaults}); err != nil {
		return "", "", err
	}
	fmt.Fprintf(r.out, "chaos: the roles reach PostgreSQL through %s and NATS through %s, both injecting faults\n", r.pgProxy.Addr(), r.natsProxy.Addr())
	return u.String(), "nats://" + r.natsProxy.Addr(), nil
}

// whileWorking keeps the connection faults on after the chaos phase until nine in ten of the
// accepted intents came to rest, for 30 ms an intent at most: the roles batch their work and
// lag behind the producer on a loaded machine, and faults that stopped with the producer would
// meet little of it.
func (r *run) whileWorking(ctx context.Context, accepted int) {
	deadline := time.Now().Add(time.Duration(accepted) * 30 * time.Millisecond)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var done int
		err := r.pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE state IN ('published', 'failed', 'parked')`).Scan(&done)
		if err == nil && done*10 >= accepted*9 {
			fmt.Fprintf(r.out, "chaos: %5s %d of %d intents at rest; the connection faults stop\n", r.elapsed(), done, accepted)
			return
		}
		time.Sleep(time.Second)
	}
	fmt.Fprintf(r.out, "chaos: %5s the connection faults stop\n", r.elapsed())
}

// stopConnectionFaults ends the proxies' faults and records what they did.
func (r *run) stopConnectionFaults(res *Result) {
	r.pgProxy.StopFaults()
	r.natsProxy.StopFaults()
	res.PostgresFaults, res.NATSConnFaults = r.pgProxy.Counts(), r.natsProxy.Counts()
	res.ProxiedConnections = map[string]int{"postgres": r.pgProxy.Connections(), "nats": r.natsProxy.Connections()}
}

func (r *run) closeProxies() {
	for _, p := range []*faultproxy.Proxy{r.pgProxy, r.natsProxy} {
		if p != nil {
			_ = p.Close()
		}
	}
}

// countErrors counts the roles' ERROR log lines by message.
func (r *run) countErrors(res *Result) {
	res.Errors = map[string]int{}
	for _, name := range r.roleNames {
		f, err := os.Open(filepath.Join(r.opts.Dir, "logs", name+".log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Level == "error" {
				res.Errors[line.Msg]++
			}
		}
		f.Close()
	}
}

// reportConnections prints what the connection faults did and what the run saw of them.
func (res Result) reportConnections(w io.Writer) {
	if res.ConnectionFaults {
		fmt.Fprintf(w, "connection faults: postgres: %s; nats: %s; connections through the proxies: %s\n",
			faultproxy.Format(res.PostgresFaults), faultproxy.Format(res.NATSConnFaults), formatCounts(res.ProxiedConnections))
	}
	fmt.Fprintf(w, "came to rest %s after the faults stopped; keys looked up more often than claimed: %d\n",
		res.Settled.Round(time.Second), res.LookupsOverClaims)
	if len(res.ParkedWithObject) > 0 {
		fmt.Fprintf(w, "parked with an object on the platform, by reason: %s\n", formatCounts(res.ParkedWithObject))
	}
	if res.ConnectionFaults {
		fmt.Fprintf(w, "parked by the connections' faults alone (an object on the platform, a reason no platform fault gives): %d\n", len(res.ParkedByConnections))
	}
	if len(res.Errors) > 0 {
		var lines []string
		for msg, n := range res.Errors {
			lines = append(lines, fmt.Sprintf("%6d  %s", n, msg))
		}
		sort.Strings(lines)
		fmt.Fprintf(w, "ERROR lines in the roles' logs, by message:\n%s\n", strings.Join(lines, "\n"))
	}
}
