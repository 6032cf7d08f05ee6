package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
)

// Topology is the shape of a run: the NATS servers and how many processes of each role.
type Topology struct {
	// NATSServers is 1 (one server, R1 streams) or 3 (a JetStream cluster, R3 streams).
	NATSServers                                   int
	Ingesters, Dispatchers, Sweepers, Reconcilers int
}

var (
	// Single is make chaos: one NATS server; ingest, two dispatchers, the sweeper, the
	// reconciler.
	Single = Topology{NATSServers: 1, Ingesters: 1, Dispatchers: 2, Sweepers: 1, Reconcilers: 1}
	// Cluster is make chaos-cluster: a three-node JetStream cluster with R3 streams, two
	// ingesters, four dispatchers, two sweepers and two reconcilers, every role given every
	// server's URL.
	Cluster = Topology{NATSServers: 3, Ingesters: 2, Dispatchers: 4, Sweepers: 2, Reconcilers: 2}
)

func (t Topology) clustered() bool { return t.NATSServers > 1 }

// roles names the role processes: the binary's name, numbered when there are several
// (ingest, dispatcher-1, dispatcher-2, ...). Ingest comes first: it creates the streams the
// producer needs.
func (t Topology) roles() []string {
	var out []string
	for _, r := range []struct {
		binary string
		n      int
	}{{"ingest", t.Ingesters}, {"dispatcher", t.Dispatchers}, {"sweeper", t.Sweepers}, {"reconciler", t.Reconcilers}} {
		for i := 1; i <= r.n; i++ {
			if r.n == 1 {
				out = append(out, r.binary)
			} else {
				out = append(out, fmt.Sprintf("%s-%d", r.binary, i))
			}
		}
	}
	return out
}

// natsConfig is the server configuration atmost's deployments run every NATS server with
// (compose.yaml mounts the same file); the suite's servers take it too, their names, ports,
// store and cluster on the command line as compose gives them.
const natsConfig = "deploy/nats/jetstream.conf"

// natsServer is one NATS server of the run; its proc's name is the server's name, the one
// stream info names as a stream's cluster leader.
type natsServer struct {
	*proc
	url     string
	monitor string
}

// pauseFor is the least a stopped server stays stopped: past the longest a NATS server's Raft
// follower waits without hearing from its leader before it stands for election (nats-server
// picks 4 to 9 s at random), and past the 15 s after which a role's connection gives up on a
// server that answers no PING (internal/role), so the roles connected to it move too.
const pauseFor = 20 * time.Second

// startNATS starts the topology's NATS servers, each with the deployments' configuration, and
// waits until every one reports itself healthy (for a cluster: JetStream's meta group current).
func (r *run) startNATS(ctx context.Context, bin, logs string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	conf := filepath.Join(root, natsConfig)
	if _, err := os.Stat(conf); err != nil {
		return fmt.Errorf("the NATS servers' configuration: %w", err)
	}
	n := r.opts.Topology.NATSServers
	type ports struct{ client, cluster, monitor int }
	all := make([]ports, n)
	var routes []string
	for i := range all {
		for _, p := range []*int{&all[i].client, &all[i].cluster, &all[i].monitor} {
			if *p, err = freePort(); err != nil {
				return err
			}
		}
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", all[i].cluster))
	}
	for i, p := range all {
		name, store := "atmost-chaos", filepath.Join(r.opts.Dir, "nats")
		if n > 1 {
			name, store = fmt.Sprintf("nats-%d", i+1), filepath.Join(r.opts.Dir, fmt.Sprintf("nats-%d", i+1))
		}
		args := []string{"--config", conf, "--server_name", name, "--addr", "127.0.0.1", "--port", fmt.Sprint(p.client),
			"--http_port", fmt.Sprint(p.monitor), "--jetstream", "--store_dir", store}
		if n > 1 {
			args = append(args, "--cluster_name", "atmost-chaos", "--cluster", routes[i], "--routes", strings.Join(routes, ","))
		}
		s := &natsServer{url: fmt.Sprintf("nats://127.0.0.1:%d", p.client), monitor: fmt.Sprintf("http://127.0.0.1:%d", p.monitor),
			proc: &proc{name: name, bin: filepath.Join(bin, "nats-server"), args: args, log: filepath.Join(logs, name+".log")}}
		r.nats = append(r.nats, s)
		if err := s.start(); err != nil {
			return err
		}
	}
	if err := r.waitNATSHealthy(ctx, time.Minute); err != nil {
		return err
	}
	// The suite runs with the durability it documents: every server fsyncs before it
	// acknowledges. A configuration file that failed to apply would leave the lazy default.
	for _, s := range r.nats {
		always, err := s.syncAlways()
		if err != nil {
			return err
		}
		if !always {
			return fmt.Errorf("%s runs without sync_interval: always (config %s)", s.name, conf)
		}
	}
	return nil
}

// natsURLs is every server's client URL, comma-separated, as every role and client is given.
func (r *run) natsURLs() string {
	var urls []string
	for _, s := range r.nats {
		urls = append(urls, s.url)
	}
	return strings.Join(urls, ",")
}

// monitoring asks the servers' monitoring endpoints; a stopped server answers nothing.
var monitoring = &http.Client{Timeout: 2 * time.Second}

// healthy asks the server's monitoring endpoint: 200 once it takes connections and, in a
// cluster, its JetStream meta group and every stream and consumer replica it holds are current.
func (s *natsServer) healthy() error {
	resp, err := monitoring.Get(s.monitor + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return fmt.Errorf("%s: healthz %s %s", s.name, resp.Status, body.Error)
	}
	return nil
}

// syncAlways reports whether the server fsyncs every JetStream write before acknowledging it,
// as its /varz says.
func (s *natsServer) syncAlways() (bool, error) {
	resp, err := monitoring.Get(s.monitor + "/varz")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var varz struct {
		JetStream struct {
			Config struct {
				SyncAlways bool `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&varz); err != nil {
		return false, fmt.Errorf("%s: /varz: %w", s.name, err)
	}
	return varz.JetStream.Config.SyncAlways, nil
}

// waitNATSHealthy waits until every server is healthy.
func (r *run) waitNATSHealthy(ctx context.Context, within time.Duration) error {
	for _, s := range r.nats {
		if err := waitFor(ctx, within, s.healthy); err != nil {
			return fmt.Errorf("the NATS server %s is not healthy: %w (log %s)", s.name, err, s.log)
		}
	}
	return nil
}

// clientOptions are the driver's and the producer's: reconnect for ever, and give up on a
// server that answers no PING for two seconds (one stopped with SIGSTOP keeps its
// connections open and answers nothing), for another.
func clientOptions(name string) []nats.Option {
	return []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2)}
}

// jetStream connects to every server, for the driver's own look at the streams.
func (r *run) jetStream() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(r.natsURLs(), clientOptions("atmost chaos driver")...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// leaderOf asks JetStream which server leads stream now ("" while it has none), and tells
// r.leaders what it saw.
func (r *run) leaderOf(ctx context.Context, js jetstream.JetStream, stream string) (string, error) {
	name, err := leaderOf(ctx, js, stream)
	if err == nil {
		r.leaders.observe(stream, name)
	}
	return name, err
}

func leaderOf(ctx context.Context, js jetstream.JetStream, stream string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return "", err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil {
		return "", fmt.Errorf("stream %s has no cluster information", stream)
	}
	return info.Cluster.Leader, nil
}

// leaderOfStream waits until stream has a leader and returns its server.
func (r *run) leaderOfStream(ctx context.Context, js jetstream.JetStream, stream string) (*natsServer, error) {
	var leader *natsServer
	err := waitFor(ctx, time.Minute, func() error {
		name, err := r.leaderOf(ctx, js, stream)
		if err != nil {
			return err
		}
		for _, s := range r.nats {
			if s.name == name {
				leader = s
				return nil
			}
		}
		return fmt.Errorf("stream %s has no leader (%q)", stream, name)
	})
	return leader, err
}

// natsFault is one thing the driver does to the NATS servers.
type natsFault struct {
	// at is the fraction of the chaos phase after which it happens (and after the fault
	// before it recovered).
	at float64
	do func(ctx context.Context, r *run, js jetstream.JetStream, rng *rand.Rand, res *natsResult) error
}

// natsResult is what the NATS faults did.
type natsResult struct {
	restarts, kills, leaderKills, pauses int
	// faults lists what went wrong (Result.NATSFaults).
	faults []string
}

// natsFaults is the schedule of a topology's NATS faults. One server is restarted cleanly once.
// A cluster loses the leader of ATMOST_DISPATCH and that of ATMOST_EVENTS to SIGKILL, has the
// leader of ATMOST_EVENTS stopped (SIGSTOP) until another server leads the stream (past the
// election timeout) and then continued, a stale leader that wakes up, and loses a server
// chosen at random to SIGKILL; every killed server is restarted on its store.
func (t Topology) natsFaults() []natsFault {
	if !t.clustered() {
		return []natsFault{{at: 1.0 / 3, do: restartNATS}}
	}
	return []natsFault{
		{at: 1.0 / 8, do: killLeader(events.DispatchStream)},
		{at: 2.0 / 8, do: killLeader(events.EventsStream)},
		{at: 3.0 / 8, do: pauseLeader(events.EventsStream)},
		{at: 5.0 / 8, do: killAny},
	}
}

func restartNATS(_ context.Context, r *run, _ jetstream.JetStream, rng *rand.Rand, res *natsResult) error {
	s := r.nats[0]
	fmt.Fprintf(r.out, "chaos: %5s restarting the NATS server\n", r.elapsed())
	s.stop(10 * time.Second)
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
	res.restarts++
	return s.start()
}

func killLeader(stream string) func(context.Context, *run, jetstream.JetStream, *rand.Rand, *natsResult) error {
	return func(ctx context.Context, r *run, js jetstream.JetStream, rng *rand.Rand, res *natsResult) error {
		leader, err := r.leaderOfStream(ctx, js, stream)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "chaos: %5s SIGKILL %s, the leader of %s\n", r.elapsed(), leader.name, stream)
		leader.kill()
		res.kills++
		res.leaderKills++
		// It stays down until the other two elected a leader without it: restarted at once, it
		// could stand again before either noticed its silence, and nothing would have changed.
		err = r.waitNewLeader(ctx, js, stream, leader, 2*time.Minute)
		fmt.Fprintf(r.out, "chaos: %5s restarting %s\n", r.elapsed(), leader.name)
		res.restarts++
		if serr := leader.start(); serr != nil {
			return serr
		}
		return err
	}
}

// waitNewLeader waits until a server other than old leads stream.
func (r *run) waitNewLeader(ctx context.Context, js jetstream.JetStream, stream string, old *natsServer, within time.Duration) error {
	err := waitFor(ctx, within, func() error {
		name, err := r.leaderOf(ctx, js, stream)
		if err != nil {
			return err
		}
		if name == "" || name == old.name {
			return fmt.Errorf("%s is still led by %q", stream, name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("no other server took over %s from %s: %w", stream, old.name, err)
	}
	return nil
}

func killAny(_ context.Context, r *run, _ jetstream.JetStream, rng *rand.Rand, res *natsResult) error {
	s := r.nats[rng.IntN(len(r.nats))]
	fmt.Fprintf(r.out, "chaos: %5s SIGKILL %s, restarted within a second\n", r.elapsed(), s.name)
	s.kill()
	res.kills++
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
	res.restarts++
	return s.start()
}

// pauseLeader stops stream's leader with SIGSTOP until JetStream names another leader, which
// the other two elect once the election timeout passed without a word from it, and for
// pauseFor at least, then continues it: it wakes up believing it leads.
func pauseLeader(stream string) func(context.Context, *run, jetstream.JetStream, *rand.Rand, *natsResult) error {
	return func(ctx context.Context, r *run, js jetstream.JetStream, _ *rand.Rand, res *natsResult) error {
		leader, err := r.leaderOfStream(ctx, js, stream)
		if err != nil {
			return err
		}
		fmt.Fprintf(r.out, "chaos: %5s SIGSTOP %s, the leader of %s, until another server leads it\n", r.elapsed(), leader.name, stream)
		leader.signal(syscall.SIGSTOP)
		res.pauses++
		stopped := time.Now()
		err = r.waitNewLeader(ctx, js, stream, leader, 2*time.Minute)
		if rest := pauseFor - time.Since(stopped); rest > 0 {
			time.Sleep(rest)
		}
		fmt.Fprintf(r.out, "chaos: %5s SIGCONT %s after %s\n", r.elapsed(), leader.name, time.Since(stopped).Round(100*time.Millisecond))
		leader.signal(syscall.SIGCONT)
		return err
	}
}

// leaders counts the changes of each stream's leader that the driver sees: it polls, and the
// faults tell it what they see, so a change and its reversal between two looks go unseen and
// the count is a lower bound.
type leaders struct {
	mu      sync.Mutex
	last    map[string]string
	changes map[string]int
}

func newLeaders() *leaders { return &leaders{last: map[string]string{}, changes: map[string]int{}} }

// observe records that name leads stream ("" while none does, which changes nothing).
func (l *leaders) observe(stream, name string) {
	if name == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if last, ok := l.last[stream]; ok && last != name {
		l.changes[stream]++
	}
	l.last[stream] = name
}

// watchLeaders looks at every stream's leader four times a second until ctx ends.
func (r *run) watchLeaders(ctx context.Context, js jetstream.JetStream) {
	streams := []string{events.IntentsStream, events.EventsStream, events.DispatchStream, events.RejectsStream}
	for ctx.Err() == nil {
		for _, stream := range streams {
			_, _ = r.leaderOf(ctx, js, stream)
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// counts returns the changes seen per stream.
func (l *leaders) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.changes {
		out[k] = v
	}
	return out
}

// formatCounts writes "a 1, b 2" in the order of the names.
func formatCounts(m map[string]int) string {
	var out []string
	for name, n := range m {
		out = append(out, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
