package deploy_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/migrations"
)

// root is the repository's top directory, where compose.yaml and the Dockerfile live.
const root = "../../.."

// A size is one profile of compose.yaml: a ledger database, NATS, the roles and Prometheus.
type size struct {
	profile string
	// roles holds the binaries of the atmost roles, each with the number of instances the size
	// runs.
	roles map[string]int
	// replicas is the ATMOST_STREAM_REPLICAS every role of the size sets.
	replicas string
	// ledger returns the size's database servers and the port the roles reach them on.
	ledger func(t *testing.T, p *types.Project) (nodes []string, port uint16)
}

var (
	single = size{
		profile:  "single",
		roles:    map[string]int{"ingest": 1, "dispatcher": 1, "sweeper": 1, "reconciler": 1},
		replicas: "1",
		ledger:   postgresServers,
	}
	cluster = size{
		profile:  "cluster",
		roles:    map[string]int{"ingest": 1, "dispatcher": 2, "sweeper": 1, "reconciler": 1},
		replicas: "3",
		ledger:   cockroachNodes,
	}
	sizes = []size{single, cluster}
)

// allProfiles enables every service, whatever its profile.
const allProfiles = "*"

// loadCompose loads and validates compose.yaml as docker compose --profile profile would,
// without a Docker engine: the schema, interpolation (from an empty environment, so the file
// cannot depend on the caller's), merge keys, the profile's selection and the consistency
// checks on what it selects (every depends_on, volume and network declared and enabled, so a
// service that depends on one of another size fails here). The returned project's Services are
// the profile's; no profile enables only the services that have none.
func loadCompose(t *testing.T, profiles ...string) *types.Project {
	t.Helper()
	dir, err := filepath.Abs(root)
	require.NoError(t, err)
	path := filepath.Join(dir, "compose.yaml")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: path, Content: body}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) {
		o.ResolvePaths = true
		o.Profiles = profiles
	})
	require.NoError(t, err, "compose.yaml does not load with profiles %v", profiles)
	return p
}

// binary is the program a service runs: its command's first word.
func binary(s types.ServiceConfig) string {
	if len(s.Entrypoint) > 0 {
		return filepath.Base(s.Entrypoint[0])
	}
	if len(s.Command) == 0 {
		return ""
	}
	return filepath.Base(s.Command[0])
}

// byBinary returns the services built from the Dockerfile that run bin.
func byBinary(p *types.Project, bin string) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range sortedNames(p) {
		s := p.Services[name]
		if s.Build != nil && binary(s) == bin {
			out = append(out, s)
		}
	}
	return out
}

// byImage returns the services whose image starts with prefix.
func byImage(p *types.Project, prefix string) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range sortedNames(p) {
		if s := p.Services[name]; strings.HasPrefix(s.Image, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func names(services []types.ServiceConfig) []string {
	out := make([]string, 0, len(services))
	for _, s := range services {
		out = append(out, s.Name)
	}
	return out
}

func sortedNames(p *types.Project) []string {
	names := make([]string, 0, len(p.Services))
	for name := range p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// flag returns the value of --name=value in args, and whether it is there.
func flag(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func env(t *testing.T, s types.ServiceConfig, name string) string {
	t.Helper()
	v, ok := s.Environment[name]
	require.True(t, ok && v != nil, "service %s: %s is not set", s.Name, name)
	return *v
}

func volumeAt(t *testing.T, p *types.Project, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			require.Equal(t, types.VolumeTypeVolume, v.Type, "service %s: %s must be a named volume", s.Name, target)
			_, declared := p.Volumes[v.Source]
			require.True(t, declared, "service %s: volume %s is not declared", s.Name, v.Source)
			return v.Source
		}
	}
	t.Fatalf("service %s: no volume mounted at %s", s.Name, target)
	return ""
}

func requireDependsOn(t *testing.T, s types.ServiceConfig, on, condition string) {
	t.Helper()
	d, ok := s.DependsOn[on]
	require.True(t, ok, "service %s must depend on %s", s.Name, on)
	require.Equal(t, condition, d.Condition, "service %s: depends_on %s", s.Name, on)
}

// theMigrateJob returns the one service of a size that runs the atmost CLI.
func theMigrateJob(t *testing.T, p *types.Project) types.ServiceConfig {
	t.Helper()
	migrate := byBinary(p, "atmost")
	require.Len(t, migrate, 1, "one service runs the atmost CLI")
	m := migrate[0]
	require.Equal(t, []string{"atmost", "migrate", "--create-database"}, []string(m.Command))
	return m
}

func TestComposeRunsNothingUntilASizeIsChosen(t *testing.T) {
	// A service without a profile would start with a bare `docker compose up`, and with
	// either size whatever it needs: none has one, and each belongs to a size.
	require.Empty(t, loadCompose(t).Services, "services without a profile")
	known := map[string]bool{}
	for _, z := range sizes {
		known[z.profile] = true
	}
	all := loadCompose(t, allProfiles)
	require.NotEmpty(t, all.Services)
	for _, name := range sortedNames(all) {
		for _, profile := range all.Services[name].Profiles {
			require.True(t, known[profile], "service %s is in profile %q, which is no size", name, profile)
		}
	}
}

func cockroachNodes(t *testing.T, p *types.Project) ([]string, uint16) {
	t.Helper()
	var started []string
	for _, s := range byImage(p, "cockroachdb/cockroach:") {
		if len(s.Command) > 0 && s.Command[0] == "start" {
			started = append(started, s.Name)
		}
	}
	return started, 26257
}

func postgresServers(t *testing.T, p *types.Project) ([]string, uint16) {
	t.Helper()
	return names(byImage(p, "postgres:")), 5432
}

func TestComposeRunsAThreeNodeCockroachDBCluster(t *testing.T) {
	p := loadCompose(t, cluster.profile)
	nodes := byImage(p, "cockroachdb/cockroach:")
	var started []types.ServiceConfig
	for _, s := range nodes {
		if len(s.Command) > 0 && s.Command[0] == "start" {
			started = append(started, s)
		}
	}
	require.Len(t, started, 3, "three CockroachDB nodes (cockroach start)")
	names := names(started)
	stores := map[string]bool{}
	for _, s := range started {
		require.Contains(t, s.Command, "--insecure", "%s: the example runs insecure", s.Name)
		join, ok := flag(s.Command, "--join")
		require.True(t, ok, "%s: no --join", s.Name)
		for _, n := range names {
			require.Contains(t, strings.Split(join, ","), n, "%s: --join must list every node", s.Name)
		}
		advertise, ok := flag(s.Command, "--advertise-addr")
		require.True(t, ok, "%s: no --advertise-addr", s.Name)
		require.True(t, strings.HasPrefix(advertise, s.Name+":"), "%s advertises %s", s.Name, advertise)
		store, ok := flag(s.Command, "--store")
		require.True(t, ok, "%s: no --store", s.Name)
		stores[volumeAt(t, p, s, store)] = true
		require.NotNil(t, s.HealthCheck, "%s: the jobs wait for the node to be healthy", s.Name)
		require.Contains(t, strings.Join(s.HealthCheck.Test, " "), "/health?ready=1", "%s", s.Name)
	}
	require.Len(t, stores, 3, "each node keeps its own store volume")

	// The init job runs cockroach init against a node, after every node has started.
	var init []types.ServiceConfig
	for _, s := range nodes {
		if strings.Contains(strings.Join(append(slices.Clone(s.Entrypoint), s.Command...), " "), "cockroach init") {
			init = append(init, s)
		}
	}
	require.Len(t, init, 1, "one job runs cockroach init")
	for _, n := range names {
		requireDependsOn(t, init[0], n, types.ServiceConditionStarted)
	}

	// The migrate job: atmost migrate --create-database against the initialized cluster, as a
	// user that may create the database and the application role.
	m := theMigrateJob(t, p)
	requireDependsOn(t, m, init[0].Name, types.ServiceConditionCompletedSuccessfully)
	for _, n := range names {
		requireDependsOn(t, m, n, types.ServiceConditionHealthy)
	}
	cfg := requireLedgerURL(t, env(t, m, "ATMOST_DATABASE_URL"), names, 26257)
	require.NotEqual(t, migrations.AppRole, cfg.User, "the migrate job creates %s; it cannot be it", migrations.AppRole)
}

func TestComposeRunsOnePostgreSQL(t *testing.T) {
	p := loadCompose(t, single.profile)
	servers := byImage(p, "postgres:")
	require.Len(t, servers, 1, "one PostgreSQL server")
	s := servers[0]
	// The image keeps its cluster in PGDATA (its default below PostgreSQL 18).
	pgdata := "/var/lib/postgresql/data"
	if v, ok := s.Environment["PGDATA"]; ok && v != nil {
		pgdata = *v
	}
	volumeAt(t, p, s, pgdata)
	require.NotNil(t, s.HealthCheck, "%s: the migrate job waits for it to be healthy", s.Name)
	require.Contains(t, strings.Join(s.HealthCheck.Test, " "), "pg_isready", "%s", s.Name)
	// atmost migrate creates the application role without a password, so the roles can log
	// in only where the server trusts them; the server is then kept off the host's ports.
	require.Equal(t, "trust", env(t, s, "POSTGRES_HOST_AUTH_METHOD"), "%s: %s has no password", s.Name, migrations.AppRole)
	require.Empty(t, s.Ports, "%s trusts every connection: publish no port", s.Name)

	m := theMigrateJob(t, p)
	requireDependsOn(t, m, s.Name, types.ServiceConditionHealthy)
	cfg := requireLedgerURL(t, env(t, m, "ATMOST_DATABASE_URL"), []string{s.Name}, 5432)
	require.NotEqual(t, migrations.AppRole, cfg.User, "the migrate job creates %s; it cannot be it", migrations.AppRole)
}

func TestComposeRunsAThreeNodeNATSClusterWithJetStream(t *testing.T) {
	p := loadCompose(t, cluster.profile)
	servers := byImage(p, "nats:")
	require.Len(t, servers, 3, "three NATS servers")
	stores := map[string]bool{}
	clusters := map[string]bool{}
	for _, s := range servers {
		args := s.Command
		require.Contains(t, args, "--jetstream", "%s: JetStream must be on", s.Name)
		name, ok := flag(args, "--server_name")
		require.True(t, ok && name != "", "%s: JetStream in a cluster needs a server name", s.Name)
		clusterName, ok := flag(args, "--cluster_name")
		require.True(t, ok, "%s: no --cluster_name", s.Name)
		clusters[clusterName] = true
		_, ok = flag(args, "--cluster")
		require.True(t, ok, "%s: no --cluster listen URL", s.Name)
		routes, ok := flag(args, "--routes")
		require.True(t, ok, "%s: no --routes", s.Name)
		for _, other := range servers {
			require.Contains(t, routes, "nats://"+other.Name+":", "%s: --routes must reach %s", s.Name, other.Name)
		}
		storeDir, ok := flag(args, "--store_dir")
		require.True(t, ok, "%s: no --store_dir", s.Name)
		stores[volumeAt(t, p, s, storeDir)] = true
		require.NotNil(t, s.HealthCheck, "%s: the roles wait for it to be healthy", s.Name)
		require.Contains(t, strings.Join(s.HealthCheck.Test, " "), "/healthz", "%s", s.Name)
	}
	require.Len(t, clusters, 1, "one cluster name")
	require.Len(t, stores, 3, "each server keeps its own JetStream store volume")
}

func TestComposeRunsOneNATSServerWithJetStream(t *testing.T) {
	p := loadCompose(t, single.profile)
	servers := byImage(p, "nats:")
	require.Len(t, servers, 1, "one NATS server")
	s := servers[0]
	require.Contains(t, s.Command, "--jetstream", "%s: JetStream must be on", s.Name)
	for _, clustering := range []string{"--cluster", "--cluster_name", "--routes"} {
		_, ok := flag(s.Command, clustering)
		require.False(t, ok, "%s: %s, but a single server has no cluster to join", s.Name, clustering)
	}
	storeDir, ok := flag(s.Command, "--store_dir")
	require.True(t, ok, "%s: no --store_dir", s.Name)
	volumeAt(t, p, s, storeDir)
	require.NotNil(t, s.HealthCheck, "%s: the roles wait for it to be healthy", s.Name)
	require.Contains(t, strings.Join(s.HealthCheck.Test, " "), "/healthz", "%s", s.Name)
}

// Every NATS server of both sizes reads the repository's deploy/nats/jetstream.conf, mounted
// read-only where its --config points, and that file, as nats-server reads it, has JetStream
// write every message to disk before acknowledging it (sync_interval: always). The
// crash-and-fault suites run their servers with the same file.
func TestEveryNATSServerWritesToDiskBeforeItAcknowledges(t *testing.T) {
	want, err := filepath.Abs(filepath.Join(root, "deploy/nats/jetstream.conf"))
	require.NoError(t, err)
	opts, err := server.ProcessConfigFile(want)
	require.NoError(t, err)
	require.True(t, opts.JetStream, "%s enables JetStream", want)
	require.True(t, opts.SyncAlways, "%s: sync_interval: always", want)
	for _, z := range sizes {
		t.Run(z.profile, func(t *testing.T) {
			p := loadCompose(t, z.profile)
			for _, s := range byImage(p, "nats:") {
				inContainer, ok := flag(s.Command, "--config")
				require.True(t, ok, "%s: no --config", s.Name)
				var mounted string
				for _, v := range s.Volumes {
					if v.Target == inContainer {
						require.Equal(t, types.VolumeTypeBind, v.Type, "%s: %s must be a file of the repository", s.Name, inContainer)
						require.True(t, v.ReadOnly, "%s: mount %s read-only", s.Name, inContainer)
						mounted = v.Source
					}
				}
				require.Equal(t, want, mounted, "%s: %s", s.Name, inContainer)
			}
		})
	}
}

// roleServices returns a size's services that run a role, sorted by name.
func roleServices(p *types.Project, z size) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range sortedNames(p) {
		s := p.Services[name]
		if _, ok := z.roles[binary(s)]; ok && s.Build != nil {
			out = append(out, s)
		}
	}
	return out
}

// httpPort is the container port of a role's /healthz, /readyz and /metrics.
func httpPort(t *testing.T, s types.ServiceConfig) string {
	t.Helper()
	_, port, err := net.SplitHostPort(env(t, s, "ATMOST_HTTP_ADDR"))
	require.NoError(t, err, "%s: ATMOST_HTTP_ADDR", s.Name)
	return port
}

func TestComposeRunsEveryRole(t *testing.T) {
	for _, z := range sizes {
		t.Run(z.profile, func(t *testing.T) {
			p := loadCompose(t, z.profile)
			ledgerNodes, ledgerPort := z.ledger(t, p)
			require.NotEmpty(t, ledgerNodes, "no database server")
			natsNames := names(byImage(p, "nats:"))
			require.NotEmpty(t, natsNames, "no NATS server")
			migrate := theMigrateJob(t, p)

			for bin, want := range z.roles {
				services := byBinary(p, bin)
				instances := 0
				for _, s := range services {
					instances += s.GetScale()
				}
				require.Equal(t, want, instances, "instances of %s", bin)
				for _, s := range services {
					// Prometheus scrapes each instance at its service name, which names one
					// container only.
					require.Equal(t, 1, s.GetScale(), "%s: one container per service", s.Name)
					require.Equal(t, z.replicas, env(t, s, "ATMOST_STREAM_REPLICAS"), "%s: R%s streams", s.Name, z.replicas)
					cfg := requireLedgerURL(t, env(t, s, "ATMOST_DATABASE_URL"), ledgerNodes, ledgerPort)
					require.Equal(t, migrations.AppRole, cfg.User, "%s: the roles connect as the application role", s.Name)

					var natsHosts []string
					for _, raw := range strings.Split(env(t, s, "ATMOST_NATS_URL"), ",") {
						u, err := url.Parse(strings.TrimSpace(raw))
						require.NoError(t, err, "%s: ATMOST_NATS_URL", s.Name)
						require.Equal(t, "nats", u.Scheme, "%s: ATMOST_NATS_URL", s.Name)
						natsHosts = append(natsHosts, u.Hostname())
					}
					require.ElementsMatch(t, natsNames, natsHosts, "%s: ATMOST_NATS_URL must list every NATS server", s.Name)

					requireDependsOn(t, s, migrate.Name, types.ServiceConditionCompletedSuccessfully)
					for _, n := range natsNames {
						requireDependsOn(t, s, n, types.ServiceConditionHealthy)
					}

					// /healthz, /readyz and /metrics: served on all interfaces inside the
					// container and published on the host (on loopback, see below).
					publishes(t, s, httpPort(t, s))
				}
			}

			sims := byBinary(p, "platformsim")
			require.Len(t, sims, 1, "one platform simulator")
			_, port, err := net.SplitHostPort(env(t, sims[0], "ATMOST_SIM_ADDR"))
			require.NoError(t, err)
			publishes(t, sims[0], port)
		})
	}
}

// publishes requires s to publish its container port target on the host.
func publishes(t *testing.T, s types.ServiceConfig, target string) {
	t.Helper()
	for _, port := range s.Ports {
		if port.Target != 0 && target == strconv.FormatUint(uint64(port.Target), 10) {
			require.NotEmpty(t, port.Published, "%s: port %s", s.Name, target)
			return
		}
	}
	t.Fatalf("service %s does not publish its port %s", s.Name, target)
}

func TestComposePublishesOnLoopbackOnlyAndEachHostPortOnce(t *testing.T) {
	for _, z := range sizes {
		t.Run(z.profile, func(t *testing.T) {
			p := loadCompose(t, z.profile)
			owners := map[string]string{}
			for _, name := range sortedNames(p) {
				for _, port := range p.Services[name].Ports {
					require.Equal(t, "127.0.0.1", port.HostIP, "%s: publish %d on localhost only", name, port.Target)
					require.NotEmpty(t, port.Published, "%s: port %d has no fixed host port", name, port.Target)
					hostPort := port.Published + "/" + port.Protocol
					require.NotContains(t, owners, hostPort, "%s and %s publish the same host port", name, owners[hostPort])
					owners[hostPort] = name
				}
			}
			require.NotEmpty(t, owners)
		})
	}
}

// requireLedgerURL checks that raw reaches the ledger (the database atmost) on servers of the
// size only, at port, and returns the parsed URL.
func requireLedgerURL(t *testing.T, raw string, nodes []string, port uint16) *pgconn.Config {
	t.Helper()
	cfg, err := pgconn.ParseConfig(raw)
	require.NoError(t, err, "database URL %q", raw)
	require.Equal(t, "atmost", cfg.Database, "database URL %q", raw)
	hosts := []string{cfg.Host}
	ports := []uint16{cfg.Port}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
		ports = append(ports, f.Port)
	}
	for i, h := range hosts {
		require.Contains(t, nodes, h, "database URL %q names a host that is not a database server of the size", raw)
		require.Equal(t, port, ports[i], "database URL %q: %s", raw, h)
	}
	return cfg
}

// envName matches an environment variable of atmost in help text.
var envName = regexp.MustCompile(`\bATMOST_[A-Z0-9_]+\b`)

func helpEnv(t *testing.T, bin string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	noEnv := func(string) (string, bool) { return "", false }
	var out bytes.Buffer
	var code int
	switch bin {
	case "ingest":
		code = ingest.Main(ctx, []string{"--help"}, noEnv, &out)
	case "dispatcher":
		code = dispatch.Main(ctx, []string{"--help"}, noEnv, &out)
	case "sweeper":
		code = sweep.Main(ctx, []string{"--help"}, noEnv, &out)
	case "reconciler":
		code = reconcile.Main(ctx, []string{"--help"}, noEnv, &out)
	case "platformsim":
		code = platformsim.Main(ctx, []string{"--help"}, noEnv, &out, &out)
	case "atmost":
		// The CLI's own help names what every command reads; migrate's its flags'.
		streams := cli.IO{Stdout: &out, Stderr: &out, Env: noEnv}
		code = cli.Run(ctx, streams, []string{"--help"})
		if code == 0 {
			code = cli.Run(ctx, streams, []string{"migrate", "--help"})
		}
	default:
		t.Fatalf("no help known for binary %q", bin)
	}
	require.Equal(t, 0, code, "%s --help:\n%s", bin, out.String())
	names := map[string]bool{}
	for _, n := range envName.FindAllString(out.String(), -1) {
		names[n] = true
	}
	require.NotEmpty(t, names, "%s --help names no environment variable", bin)
	return names
}

func TestComposeSetsOnlyVariablesTheBinariesKnow(t *testing.T) {
	p := loadCompose(t, allProfiles)
	helps := map[string]map[string]bool{}
	checked := 0
	for _, name := range sortedNames(p) {
		s := p.Services[name]
		if s.Build == nil {
			continue
		}
		bin := binary(s)
		if helps[bin] == nil {
			helps[bin] = helpEnv(t, bin)
		}
		for variable := range s.Environment {
			require.True(t, helps[bin][variable], "service %s sets %s, which %s --help does not name", name, variable, bin)
			checked++
		}
	}
	require.NotZero(t, checked)
	for _, z := range sizes {
		for bin := range z.roles {
			require.Contains(t, helps, bin, "no service runs %s", bin)
		}
	}
}

var goBuild = regexp.MustCompile(`go build[^\n]*?(?:\\\n[^\n]*?)*?\s(\./cmd/\S*)`)

func TestDockerfileBuildsEveryBinaryTheServicesRun(t *testing.T) {
	p := loadCompose(t, allProfiles)
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	text := string(dockerfile)

	// The build stage's Go is the one go.mod asks for.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))
	require.NotNil(t, goVersion, "go.mod has no go line")
	require.Regexp(t, `(?m)^FROM golang:`+regexp.QuoteMeta(goVersion[1])+`\b\S* AS build$`, text, "the build stage must use go.mod's Go")

	m := goBuild.FindStringSubmatch(text)
	require.NotNil(t, m, "the Dockerfile has no go build of ./cmd/...")
	built := map[string]bool{}
	if m[1] == "./cmd/..." {
		dirs, err := os.ReadDir(filepath.Join(root, "cmd"))
		require.NoError(t, err)
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(root, "cmd", d.Name(), "main.go")); err == nil {
				built[d.Name()] = true
			}
		}
	} else {
		built[strings.TrimPrefix(m[1], "./cmd/")] = true
	}
	// The binaries land in a directory on the final image's PATH.
	require.Regexp(t, `(?m)^COPY --from=build /out/ /usr/local/bin/$`, text)
	require.Regexp(t, `(?m)^ENV PATH=(\S*:)?/usr/local/bin(:\S*)?$`, text)

	for _, name := range sortedNames(p) {
		s := p.Services[name]
		if s.Build == nil {
			continue
		}
		require.Equal(t, "Dockerfile", filepath.Base(s.Build.Dockerfile), "service %s", name)
		ctx, err := filepath.Abs(root)
		require.NoError(t, err)
		require.Equal(t, ctx, s.Build.Context, "service %s builds from the repository root", name)
		require.True(t, built[binary(s)], "service %s runs %q, which the Dockerfile does not build", name, binary(s))
	}
}
