package dbtest_test

import (
	"bytes"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// The tests of scripts/postgres, the check make test, make demo and .ci/run run first. The
// script runs as make runs it, through its shebang, with a PATH that holds only the commands
// a test gives it: the real psql where the test asks the real server, and stubs that log their
// calls for the commands that would change the machine (apt-get, pg_ctlcluster, su, chown).
// No test reaches the machine's own PostgreSQL tools, so none can stop, start or reconfigure
// the server other tests use; the paths where nothing answers use a port nothing listens on.

// closedPort is a port nothing listens on: real psql is refused there at once.
const closedPort = "1"

var closedURL = "postgres://postgres@127.0.0.1:" + closedPort + "/postgres?sslmode=disable"

// machine is the commands one run of the script finds.
type machine struct {
	t   *testing.T
	dir string // the stubs' state: files they create and read
	bin string // the script's whole PATH
	log string // one line per stub call: the command and its arguments
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	dir := t.TempDir()
	m := &machine{t: t, dir: dir, bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "calls")}
	require.NoError(t, os.Mkdir(m.bin, 0o755))
	// What the script needs of an ordinary machine besides the stubs.
	for _, tool := range []string{"bash", "cat", "mv", "sleep", "timeout"} {
		m.real(tool)
	}
	return m
}

// real puts the machine's own tool on the script's PATH.
func (m *machine) real(tool string) {
	m.t.Helper()
	path, err := exec.LookPath(tool)
	require.NoError(m.t, err, "%s is not installed; the script's test needs it", tool)
	require.NoError(m.t, os.Symlink(path, filepath.Join(m.bin, tool)))
}

// stub installs a command that logs its call, then runs body (bash, with STATE naming the
// stubs' state directory).
func (m *machine) stub(name, body string) {
	m.t.Helper()
	script := "#!/bin/bash\nprintf '%s\\n' \"" + name + " $*\" >>\"$STUB_LOG\"\n" + body + "\n"
	require.NoError(m.t, os.WriteFile(filepath.Join(m.bin, name), []byte(script), 0o755))
}

// user makes id answer as uid with login name.
func (m *machine) user(uid, name string) {
	m.stub("id", `case "$1" in -u) echo `+uid+` ;; -un) echo `+name+` ;; *) exit 1 ;; esac`)
}

// root makes id answer as root.
func (m *machine) root() { m.user("0", "root") }

// clusters makes pg_lsclusters list lines ("15 main 5432 down postgres /data /log").
func (m *machine) clusters(lines ...string) {
	m.stub("pg_lsclusters", "cat <<'EOF'\n"+strings.Join(lines, "\n")+"\nEOF")
}

// psqlUntil makes psql refuse connections until the file up exists in the state directory,
// then answer as a server would, asking for a password until the file trusted exists too
// when login is "password".
func (m *machine) psqlUntil(login string) {
	m.stub("psql", `
if [ ! -e "$STATE/up" ]; then
  echo 'psql: error: connection to server at "127.0.0.1", port `+closedPort+` failed: Connection refused' >&2
  echo '	Is the server running on that host and accepting TCP/IP connections?' >&2
  exit 2
fi
if [ "`+login+`" = password ] && [ ! -e "$STATE/trusted" ]; then
  echo 'psql: error: connection to server at "127.0.0.1", port `+closedPort+` failed: FATAL:  password authentication failed for user "postgres"' >&2
  exit 2
fi
echo '17.2'`)
}

type result struct {
	out   string
	code  int
	calls []string
	took  time.Duration
}

// lines are the output's lines.
func (r result) lines() []string { return strings.Split(strings.TrimRight(r.out, "\n"), "\n") }

// run runs scripts/postgres for the variable ATMOST_TEST_DATABASE_URL set to url, with ci as
// CI ("" leaves it unset).
func (m *machine) run(server, ci string) result {
	m.t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "scripts", "postgres"))
	require.NoError(m.t, err)
	cmd := exec.Command(script, "ATMOST_TEST_DATABASE_URL")
	cmd.Env = []string{
		"PATH=" + m.bin,
		"HOME=" + m.dir,
		"STATE=" + m.dir,
		"STUB_LOG=" + m.log,
		"ATMOST_TEST_DATABASE_URL=" + server,
	}
	if ci != "" {
		cmd.Env = append(cmd.Env, "CI="+ci)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	r := result{out: out.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		require.NoError(m.t, err, "scripts/postgres did not run: %s", r.out)
	}
	if b, err := os.ReadFile(m.log); err == nil {
		r.calls = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	}
	m.t.Logf("scripts/postgres (exit %d, %s):\n%s", r.code, r.took.Round(time.Millisecond), r.out)
	return r
}

// changers are the stubbed commands that would change the machine: none may run when the
// script can only name the fix. Their stubs fail, so that a script that calls one anyway ends
// at once and the log names the call.
var changers = []string{"apt-get", "pg_ctlcluster", "pg_createcluster", "su", "chown"}

func requireNoChange(t *testing.T, r result) {
	t.Helper()
	for _, call := range r.calls {
		name, _, _ := strings.Cut(call, " ")
		require.NotContains(t, changers, name, "the script ran %q where it could only name the fix", call)
	}
}

// requireNamesTheFix: the script stops at once, exit 1, with one line that names the command.
func requireNamesTheFix(t *testing.T, r result, fix string) {
	t.Helper()
	require.Equal(t, 1, r.code, "exit code")
	require.Len(t, r.lines(), 1, "one line names the fix: %q", r.out)
	require.Contains(t, r.out, fix)
	require.Less(t, r.took, 5*time.Second, "it stops at once")
	requireNoChange(t, r)
}

func realServerURL() string {
	if u := os.Getenv("ATMOST_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return dbtest.DefaultAdminURL
}

// A server that answers is the end of it: exit 0, and nothing on the machine is touched, even
// where the script could change it (CI=true, as root). A database the URL names that does not
// exist yet counts as an answer: make demo creates its own.
func TestPostgresScriptGoesOnWhenTheServerAnswers(t *testing.T) {
	t.Parallel()
	missing, err := url.Parse(realServerURL())
	require.NoError(t, err)
	missing.Path = "/atmost_no_such_database"
	for name, server := range map[string]string{
		"database exists":  realServerURL(),
		"database missing": missing.String(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMachine(t)
			m.real("psql")
			m.root()
			m.clusters("15 main 5432 down postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log")
			for _, c := range changers {
				m.stub(c, "exit 1")
			}
			r := m.run(server, "true")
			require.Equal(t, 0, r.code, "exit code: %s", r.out)
			require.Contains(t, r.out, "answers at")
			requireNoChange(t, r)
		})
	}
}

// Where the script cannot make the server answer, or may not (outside CI=true, not as root),
// it stops at once with one line naming the one command that fixes it, and changes nothing.
func TestPostgresScriptNamesTheFixWhenItCannotStartTheServer(t *testing.T) {
	t.Parallel()
	down := "15 main " + closedPort + " down postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log"
	for _, c := range []struct {
		name  string
		ci    string
		setup func(m *machine)
		fix   string
	}{
		{"not installed, not root", "true", func(m *machine) {
			m.user("1000", "alice")
			m.stub("apt-get", "exit 0")
		}, "install it with `sudo apt-get install postgresql`"},
		{"not installed, root outside CI", "", func(m *machine) {
			m.root()
			m.stub("apt-get", "exit 0")
		}, "install it with `sudo apt-get install postgresql`"},
		{"not installed, no apt-get", "true", func(m *machine) {
			m.root()
		}, "install PostgreSQL 15 or later on port " + closedPort},
		{"cluster down, not its owner", "", func(m *machine) {
			m.user("1000", "alice")
			m.clusters(down)
		}, "start it with `sudo pg_ctlcluster 15 main start`"},
		{"cluster down, not its owner, CI", "true", func(m *machine) {
			m.user("1000", "alice")
			m.clusters(down)
		}, "start it with `sudo pg_ctlcluster 15 main start`"},
		{"no cluster on the port", "true", func(m *machine) {
			m.root()
			m.clusters("15 main 5432 online postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log")
		}, "no cluster of this machine uses port " + closedPort + " (15/main on port 5432)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newMachine(t)
			m.real("psql")
			for _, s := range changers {
				m.stub(s, "exit 1")
			}
			if c.name == "not installed, no apt-get" {
				require.NoError(t, os.Remove(filepath.Join(m.bin, "apt-get")))
			}
			c.setup(m)
			requireNamesTheFix(t, m.run(closedURL, c.ci), c.fix)
		})
	}
}

// A server on another machine is not this script's to start.
func TestPostgresScriptNeverStartsARemoteServer(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	m.root()
	m.clusters("15 main 5432 down postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log")
	for _, s := range changers {
		m.stub(s, "exit 1")
	}
	m.stub("psql", `echo 'psql: error: could not translate host name "db.example" to address: Name or service not known' >&2; exit 2`)
	requireNamesTheFix(t, m.run("postgres://postgres@db.example:5432/postgres", "true"),
		"PostgreSQL does not answer at db.example:5432 (could not translate host name \"db.example\" to address: Name or service not known): start it there, or point ATMOST_TEST_DATABASE_URL at a server that runs")
}

// A server that asks for a password is trusted over loopback only under CI=true as root;
// anywhere else pg_hba.conf is left alone and the line names the command that edits it.
func TestPostgresScriptEditsPgHbaOnlyUnderCIAsRoot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		ci        string
		uid, user string
	}{
		{"root outside CI", "", "0", "root"},
		{"CI, not root", "true", "1000", "alice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newMachine(t)
			m.user(c.uid, c.user)
			m.clusters("15 main " + closedPort + " online postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log")
			for _, s := range changers {
				m.stub(s, "exit 1")
			}
			m.psqlUntil("password")
			require.NoError(t, os.WriteFile(filepath.Join(m.dir, "up"), nil, 0o644))
			r := m.run(closedURL, c.ci)
			requireNamesTheFix(t, r,
				"refuses the login (password authentication failed for user \"postgres\"): trust loopback connections with `sudo env CI=true ATMOST_TEST_DATABASE_URL='"+closedURL+"' ")
			require.Contains(t, r.out, "/scripts/postgres ATMOST_TEST_DATABASE_URL` (it edits pg_hba.conf of cluster 15/main), or put the password in ATMOST_TEST_DATABASE_URL")
		})
	}
}

// A local cluster that is down is started, by root or by its owner, and the script waits until
// it answers.
func TestPostgresScriptStartsALocalClusterThatIsDown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, uid, user string }{
		{"root", "0", "root"},
		{"its owner", "1000", "postgres"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := newMachine(t)
			m.user(c.uid, c.user)
			m.clusters("15 main " + closedPort + " down postgres /var/lib/postgresql/15/main /var/log/postgresql/15.log")
			m.psqlUntil("trust")
			m.stub("pg_ctlcluster", `touch "$STATE/up"`)
			m.real("touch")
			r := m.run(closedURL, "")
			require.Equal(t, 0, r.code, "exit code: %s", r.out)
			require.Contains(t, r.calls, "pg_ctlcluster 15 main start")
			require.Contains(t, r.out, "starting PostgreSQL cluster 15/main (port "+closedPort+", was down)")
			require.Contains(t, r.out, "PostgreSQL 17.2 answers at 127.0.0.1:"+closedPort)
		})
	}
}

// On a fresh CI machine (CI=true, root, apt-get, no PostgreSQL) the script installs it, starts
// the cluster the package made, and trusts loopback connections in its pg_hba.conf, keeping
// every line that was there.
func TestPostgresScriptSetsUpAFreshCIMachine(t *testing.T) {
	t.Parallel()
	m := newMachine(t)
	m.root()
	m.real("touch")
	m.real("grep")
	m.psqlUntil("password")
	hba := filepath.Join(m.dir, "pg_hba.conf")
	const original = "local all postgres peer\nhost all all 127.0.0.1/32 scram-sha-256\n"
	require.NoError(t, os.WriteFile(hba, []byte(original), 0o640))
	// The package brings pg_lsclusters and pg_ctlcluster, and a cluster that is down, as
	// Debian's does where nothing may start a service.
	pkg := &machine{t: t, bin: filepath.Join(m.dir, "package")}
	require.NoError(t, os.Mkdir(pkg.bin, 0o755))
	pkg.clusters("17 main " + closedPort + " down postgres /var/lib/postgresql/17/main /var/log/postgresql/17.log")
	pkg.stub("pg_ctlcluster", `touch "$STATE/up"`)
	m.real("cp")
	m.stub("apt-get", `[ "$1" = install ] && cp "$STATE"/package/* "`+m.bin+`"/; exit 0`)
	// su runs psql as the cluster's owner: it names pg_hba.conf, and a reload trusts loopback
	// only if the file says so.
	m.stub("su", `
case "$*" in
  *"SHOW hba_file"*) echo "$STATE/pg_hba.conf" ;;
  *pg_reload_conf*) grep -q '^host all all 127.0.0.1/32 trust$' "$STATE/pg_hba.conf" && touch "$STATE/trusted"; echo t ;;
  *) exit 1 ;;
esac`)
	m.stub("chown", "exit 0")

	r := m.run(closedURL, "true")
	require.Equal(t, 0, r.code, "exit code: %s", r.out)
	require.Equal(t, []string{
		"apt-get update -qq",
		"apt-get install -y -qq postgresql postgresql-client",
		"pg_lsclusters --no-header",
		"pg_ctlcluster 17 main start",
		"pg_lsclusters --no-header",
		"su postgres -c psql -X -p " + closedPort + " -Atc 'SHOW hba_file'",
		"chown postgres: " + hba,
		"su postgres -c psql -X -p " + closedPort + " -Atc 'SELECT pg_reload_conf()'",
	}, filterCalls(r.calls, "apt-get", "pg_lsclusters", "pg_ctlcluster", "su", "chown"))
	b, err := os.ReadFile(hba)
	require.NoError(t, err)
	require.Equal(t, "host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"+original, string(b))
	for _, says := range []string{"installing PostgreSQL with apt-get", "starting PostgreSQL cluster 17/main", "trusting loopback connections in " + hba, "PostgreSQL 17.2 answers at"} {
		require.Contains(t, r.out, says)
	}
}

func filterCalls(calls []string, names ...string) []string {
	var kept []string
	for _, c := range calls {
		name, _, _ := strings.Cut(c, " ")
		for _, n := range names {
			if name == n {
				kept = append(kept, c)
			}
		}
	}
	return kept
}

// make test and make demo run the check before anything else, each on the URL it will use,
// and .ci/run runs it before the tests.
func TestMakeTestAndDemoCheckPostgreSQLFirst(t *testing.T) {
	t.Parallel()
	for target, first := range map[string]string{
		"test": "scripts/postgres ATMOST_TEST_DATABASE_URL",
		"demo": "scripts/postgres ATMOST_DEMO_DATABASE_URL",
		"dev":  "scripts/postgres ATMOST_DATABASE_URL",
	} {
		cmd := exec.Command("make", "--no-print-directory", "-n", target)
		cmd.Dir = filepath.Join("..", "..", "..")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "make -n %s: %s", target, out)
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Equal(t, first, lines[0], "make %s runs first", target)
		require.Greater(t, len(lines), 1, "make %s goes on after the check", target)
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", "..", ".ci", "run"))
	require.NoError(t, err)
	check, tests := strings.Index(string(ci), "\nmake postgres\n"), strings.Index(string(ci), "\nmake test\n")
	require.True(t, check >= 0 && check < tests, ".ci/run runs make postgres before make test")
}

// A newcomer's machine: a local cluster that asks for passwords, stopped, on the port the
// demo's URL names, and make demo run as an ordinary user. Each line names the variable and the
// database that matter for make demo, and each fix it names, run verbatim (sudo as root),
// brings the next step, until the check passes for that very URL. A password prompt never
// shows: psql is told not to ask.
func TestPostgresScriptLeadsANewcomerToAWorkingDemo(t *testing.T) {
	t.Parallel()
	const variable, demoURL = "ATMOST_DEMO_DATABASE_URL", "postgres://postgres@127.0.0.1:5441/atmost_demo?sslmode=disable"
	m := newMachine(t)
	for _, tool := range []string{"env", "touch", "grep", "cp"} {
		m.real(tool)
	}
	// id answers root under the sudo stub, the newcomer otherwise.
	m.stub("id", `if [ -n "$AS_ROOT" ]; then case "$1" in -u) echo 0 ;; -un) echo root ;; esac; else case "$1" in -u) echo 1000 ;; -un) echo newcomer ;; esac; fi`)
	m.stub("sudo", `AS_ROOT=1 exec "$@"`)
	m.clusters("15 main 5441 down postgres /var/lib/postgresql/15/main /var/log/postgresql/15-main.log")
	m.stub("pg_ctlcluster", `[ -n "$AS_ROOT" ] && touch "$STATE/up"`)
	m.stub("psql", `
case "$*" in *-w*) ;; *) printf 'Password for user postgres: '; exit 2 ;; esac
case "$*" in *5441*) ;; *) echo 'psql: error: the check asked another server than the demo'"'"'s' >&2; exit 2 ;; esac
[ -e "$STATE/up" ] || { echo 'psql: error: connection to server at "127.0.0.1", port 5441 failed: Connection refused' >&2; exit 2; }
[ -e "$STATE/trusted" ] || { echo 'psql: error: connection to server at "127.0.0.1", port 5441 failed: fe_sendauth: no password supplied' >&2; exit 2; }
echo 'psql: error: connection to server at "127.0.0.1", port 5441 failed: FATAL:  database "atmost_demo" does not exist' >&2; exit 2`)
	hba := filepath.Join(m.dir, "pg_hba.conf")
	require.NoError(t, os.WriteFile(hba, []byte("host all all 127.0.0.1/32 scram-sha-256\n"), 0o640))
	m.stub("su", `
case "$*" in
  *"SHOW hba_file"*) echo "$STATE/pg_hba.conf" ;;
  *pg_reload_conf*) grep -q '^host all all 127.0.0.1/32 trust$' "$STATE/pg_hba.conf" && touch "$STATE/trusted"; echo t ;;
  *) exit 1 ;;
esac`)
	m.stub("chown", "exit 0")
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	check := func() result {
		cmd := exec.Command("scripts/postgres", variable)
		cmd.Dir = root
		cmd.Env = []string{"PATH=" + m.bin, "HOME=" + m.dir, "STATE=" + m.dir, "STUB_LOG=" + m.log, variable + "=" + demoURL}
		out, err := cmd.CombinedOutput()
		r := result{out: string(out), code: cmd.ProcessState.ExitCode()}
		if err != nil && r.code <= 0 {
			require.NoError(t, err, "%s", out)
		}
		t.Logf("make demo's check (exit %d): %s", r.code, out)
		return r
	}
	// fix runs the command between the line's backquotes as the newcomer would paste it.
	fix := func(r result) {
		require.Equal(t, 1, r.code, r.out)
		cmd := r.out[strings.Index(r.out, "`")+1:]
		cmd = cmd[:strings.Index(cmd, "`")]
		sh := exec.Command("bash", "-c", cmd)
		sh.Dir = root
		sh.Env = []string{"PATH=" + m.bin, "HOME=" + m.dir, "STATE=" + m.dir, "STUB_LOG=" + m.log}
		out, err := sh.CombinedOutput()
		require.NoError(t, err, "the fix %q, run verbatim: %s", cmd, out)
	}

	r := check()
	require.Contains(t, r.out, "PostgreSQL is not running at 127.0.0.1:5441: start it with `sudo pg_ctlcluster 15 main start`")
	fix(r)
	r = check()
	require.Contains(t, r.out, "PostgreSQL at 127.0.0.1:5441 refuses the login (fe_sendauth: no password supplied): trust loopback connections with `sudo env CI=true "+variable+"='"+demoURL+"' scripts/postgres "+variable+"`")
	require.NotContains(t, r.out, "Password for user")
	fix(r)
	r = check()
	require.Equal(t, 0, r.code, r.out)
	require.Equal(t, "scripts/postgres: PostgreSQL answers at 127.0.0.1:5441 ("+variable+"'s database \"atmost_demo\" does not exist yet: the command creates it)\n", r.out)
}
