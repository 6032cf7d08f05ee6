// Command mutate proves that every guard of the ledger has a test: it applies each mutation of
// a list (scripts/mutations.txt) alone to a scratch copy of the repository, runs the tests the
// mutation names, and expects them to fail. `make mutate` runs it.
//
// Query guards are mutated in pkg/ledger/queries, the SQL a person reads, and the scratch copy's
// ledger code is regenerated from it with sqlc (-sqlc names the version, as the Makefile's
// generate target runs it); schema guards in the migrations (internal/dbtest names its
// template database after a hash of the migration files, so a mutated migration gets a
// template of its own). The working tree is copied as it is (uncommitted edits included, .git
// and bin left out) and never written to; its generated code must be current.
//
// Before any mutation, every named test must pass on the unmutated copy (and must exist): a
// test that is red anyway proves nothing. Then one line per mutation:
//
//	KILLED    the named tests failed, as they must
//	SURVIVED  they passed: the guard has no test that notices its removal
//	ERROR     the mutation could not be tried: its snippet is stale, the mutant does not
//	          compile, or its tests do not pass unmutated
//
// and last exactly "mutations: N, killed: K, survived: S". The exit status is 1 when anything
// survived or any mutation is in error.
//
// The tests run with CI=true, so an unreachable database fails them instead of skipping them.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	os.Exit(run(os.Stdout, os.Stderr, os.Args[1:]))
}

type options struct {
	list    string
	sqlc    string // the sqlc package@version that generates the ledger's query code
	only    *regexp.Regexp
	jobs    int
	timeout time.Duration
	keep    bool
	check   bool
}

func run(stdout, stderr io.Writer, args []string) int {
	fl := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var o options
	var only string
	fl.StringVar(&o.list, "list", "scripts/mutations.txt", "the mutation list")
	fl.StringVar(&only, "only", "", "run only the mutations whose name matches this regular expression")
	fl.IntVar(&o.jobs, "j", 2, "mutations tried at once, each in its own scratch copy")
	fl.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long the tests of one mutation may run")
	fl.BoolVar(&o.keep, "keep", false, "keep the scratch copies and logs even when every mutation was killed")
	fl.BoolVar(&o.check, "check", false, "only check that every snippet of the list occurs exactly once, run nothing")
	fl.StringVar(&o.sqlc, "sqlc", "", "the sqlc package@version that regenerates the ledger's query code after a query mutation (make mutate passes the Makefile's)")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fmt.Fprintf(stderr, "mutate: -only: %v\n", err)
			return 2
		}
		o.only = re
	}
	if o.jobs < 1 {
		o.jobs = 1
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return 1
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fmt.Fprintf(stderr, "mutate: run it from the repository root (no go.mod in %s)\n", root)
		return 2
	}
	all, err := ReadList(o.list)
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return 1
	}
	var muts []Mutation
	for _, m := range all {
		if o.only == nil || o.only.MatchString(m.Name) {
			muts = append(muts, m)
		}
	}
	if len(muts) == 0 {
		fmt.Fprintf(stderr, "mutate: no mutation matches\n")
		return 2
	}
	return runAll(root, muts, o, stdout, stderr)
}

type verdict string

const (
	killed   verdict = "KILLED"
	survived verdict = "SURVIVED"
	errored  verdict = "ERROR"
)

type result struct {
	verdict verdict
	note    string // which test failed, or why the mutation could not be tried
	elapsed time.Duration
}

func runAll(root string, muts []Mutation, o options, stdout, stderr io.Writer) int {
	results := make([]*result, len(muts))

	// A stale list is an error before anything runs.
	for i, m := range muts {
		if err := Check(root, m); err != nil {
			results[i] = &result{verdict: errored, note: err.Error()}
		}
	}
	if o.check {
		stale := 0
		for i, r := range results {
			if r != nil {
				stale++
				printLine(stdout, muts[i], r)
			}
		}
		fmt.Fprintf(stdout, "mutate: %d mutations checked, %d stale\n", len(muts), stale)
		if stale > 0 {
			return 1
		}
		return 0
	}

	work, err := os.MkdirTemp("", "atmost-mutate-")
	if err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return 1
	}
	if rel, err := filepath.Rel(root, work); err != nil || !strings.HasPrefix(rel, "..") {
		fmt.Fprintf(stderr, "mutate: scratch directory %s lies inside the repository\n", work)
		return 1
	}
	logs := filepath.Join(work, "logs")
	bins := filepath.Join(work, "bin")
	for _, d := range []string{logs, bins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(stderr, "mutate: %v\n", err)
			return 1
		}
	}
	trees := make([]string, o.jobs)
	for j := range trees {
		trees[j] = filepath.Join(work, fmt.Sprintf("tree%d", j))
		if err := copyTree(root, trees[j]); err != nil {
			fmt.Fprintf(stderr, "mutate: copy the repository: %v\n", err)
			return 1
		}
	}
	start := time.Now()
	fmt.Fprintf(stdout, "mutate: %d mutations, scratch copies in %s\n", len(muts), work)

	if err := prepareQueries(root, trees, bins, muts, results, o); err != nil {
		fmt.Fprintf(stderr, "mutate: %v\n", err)
		return 1
	}
	baseline(trees[0], bins, logs, muts, results, o, stdout)

	// The query mutations, o.jobs at a time, each job in its own copy; then the schema
	// mutations one at a time: internal/dbtest drops every template database but the one it just
	// built, so two schemas under test at once would pull the template from under each other.
	// Lines are printed in list order.
	done := make([]chan struct{}, len(muts))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var queries, schemas []int
	for i := range muts {
		switch {
		case results[i] != nil:
			close(done[i])
		case muts[i].Schema():
			schemas = append(schemas, i)
		default:
			queries = append(queries, i)
		}
	}
	go func() {
		next := make(chan int)
		var wg sync.WaitGroup
		for j := range trees {
			tree := trees[j]
			wg.Go(func() {
				for i := range next {
					results[i] = try(tree, bins, logs, muts[i], o)
					close(done[i])
				}
			})
		}
		for _, i := range queries {
			next <- i
		}
		close(next)
		wg.Wait()
		for _, i := range schemas {
			results[i] = try(trees[0], bins, logs, muts[i], o)
			close(done[i])
		}
	}()
	for i := range muts {
		<-done[i]
		printLine(stdout, muts[i], results[i])
	}

	keep := o.keep
	for _, r := range results {
		if r.verdict != killed {
			keep = true
		}
	}
	where := ""
	if keep {
		where = work
	} else {
		_ = os.RemoveAll(work)
	}
	fmt.Fprintf(stdout, "mutate: %s\n", time.Since(start).Round(time.Second))
	return report(muts, results, stdout, where)
}

// report prints the summary and returns the exit status.
func report(muts []Mutation, results []*result, stdout io.Writer, where string) int {
	var k, s, e int
	for _, r := range results {
		switch r.verdict {
		case killed:
			k++
		case survived:
			s++
		case errored:
			e++
		}
	}
	if where != "" {
		fmt.Fprintf(stdout, "mutate: logs of every mutation are in %s\n", filepath.Join(where, "logs"))
	}
	if e > 0 {
		fmt.Fprintf(stdout, "errors: %d\n", e)
	}
	fmt.Fprintf(stdout, "mutations: %d, killed: %d, survived: %d\n", len(muts), k, s)
	if s > 0 || e > 0 {
		return 1
	}
	return 0
}

func printLine(w io.Writer, m Mutation, r *result) {
	extra := r.note
	if r.elapsed > 0 {
		if extra != "" {
			extra += ", "
		}
		extra += r.elapsed.Round(100 * time.Millisecond).String()
	}
	fmt.Fprintf(w, "%-9s %s: %s (%s)\n", r.verdict, m.Name, m.Desc, extra)
}

// baseline builds each package's test binary on the unmutated copy and runs every named test
// there: each must exist, run and pass. A mutation whose tests do not is in error.
func baseline(tree, bins, logs string, muts []Mutation, results []*result, o options, stdout io.Writer) {
	type key struct{ pkg, run string }
	byKey := map[key][]int{}
	var keys []key
	for i, m := range muts {
		if results[i] != nil {
			continue
		}
		k := key{m.Package, m.Run}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	built := map[string]error{}
	binOf := map[string]string{}
	for _, k := range keys {
		if _, ok := built[k.pkg]; ok {
			continue
		}
		bin := filepath.Join(bins, "baseline-"+strings.ReplaceAll(strings.Trim(k.pkg, "./"), "/", "_")+".test")
		out, err := command(context.Background(), tree, "go", "test", "-c", "-o", bin, k.pkg)
		if err != nil {
			err = fmt.Errorf("the unmutated tests of %s do not build: %s", k.pkg, firstLines(out, 3))
		}
		built[k.pkg], binOf[k.pkg] = err, bin
	}
	var mu sync.Mutex
	sem := make(chan struct{}, o.jobs)
	var wg sync.WaitGroup
	for n, k := range keys {
		fail := func(note string) {
			mu.Lock()
			defer mu.Unlock()
			for _, i := range byKey[k] {
				results[i] = &result{verdict: errored, note: note}
			}
		}
		if err := built[k.pkg]; err != nil {
			fail(err.Error())
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, err := runTests(tree, binOf[k.pkg], k.pkg, k.run, o.timeout, true)
			_ = os.WriteFile(filepath.Join(logs, fmt.Sprintf("baseline-%02d.log", n)), out, 0o644)
			switch {
			case bytes.Contains(out, []byte("no tests to run")):
				fail(fmt.Sprintf("%s -run %q names no test", k.pkg, k.run))
			case err != nil:
				fail(fmt.Sprintf("the named tests fail without the mutation: %s", failures(out)))
			case bytes.Contains(out, []byte("--- SKIP")):
				fail(fmt.Sprintf("the named tests skip without the mutation: %s", firstMatch(out, "--- SKIP")))
			case !bytes.Contains(out, []byte("--- PASS")):
				fail(fmt.Sprintf("%s -run %q ran no test", k.pkg, k.run))
			}
		})
	}
	wg.Wait()
	bad := 0
	for _, r := range results {
		if r != nil && r.verdict == errored {
			bad++
		}
	}
	fmt.Fprintf(stdout, "mutate: baseline: %d test selections pass unmutated, %d mutations in error\n", len(keys), bad)
}

// The ledger's queries and the code sqlc generates from them.
const (
	queriesDir   = "pkg/ledger/queries"
	generatedDir = "pkg/ledger/internal/dbsqlc"
)

// prepareQueries builds sqlc once, when a mutation edits a query, and requires every scratch
// copy's generated code to be what sqlc generates from its queries: a regenerated mutant must
// differ from its tree by the mutation alone.
func prepareQueries(root string, trees []string, bins string, muts []Mutation, results []*result, o options) error {
	need := false
	for i, m := range muts {
		if results[i] == nil && m.Queries() {
			need = true
		}
	}
	if !need {
		return nil
	}
	if o.sqlc == "" {
		return errors.New("a mutation edits " + queriesDir + ": -sqlc must name sqlc's package@version (make mutate passes it)")
	}
	cmd := exec.Command("go", "install", o.sqlc)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+bins)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v: %s", o.sqlc, err, firstLines(out, 3))
	}
	for _, tree := range trees {
		before, err := snapshot(tree, generatedDir)
		if err != nil {
			return err
		}
		if out, err := command(context.Background(), tree, filepath.Join(bins, "sqlc"), "generate"); err != nil {
			return fmt.Errorf("sqlc generate on the unmutated copy: %v: %s", err, firstLines(out, 3))
		}
		after, err := snapshot(tree, generatedDir)
		if err != nil {
			return err
		}
		for file, b := range after {
			if string(before[file]) != string(b) {
				return fmt.Errorf("%s is not what sqlc generates from %s: run make generate", file, queriesDir)
			}
		}
	}
	return nil
}

// snapshot reads every file of dir in tree, keyed by its path relative to tree.
func snapshot(tree, dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(filepath.Join(tree, dir))
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		rel := filepath.ToSlash(filepath.Join(dir, e.Name()))
		b, err := os.ReadFile(filepath.Join(tree, rel))
		if err != nil {
			return nil, err
		}
		out[rel] = b
	}
	return out, nil
}

// try applies m to tree (and regenerates the ledger's query code when m edits a query), runs
// its tests and restores the tree.
func try(tree, bins, logs string, m Mutation, o options) *result {
	start := time.Now()
	log := func(out []byte) { _ = os.WriteFile(filepath.Join(logs, m.Name+".log"), out, 0o644) }
	originals, err := Apply(tree, m, true)
	if err != nil {
		return &result{verdict: errored, note: err.Error()}
	}
	defer func() {
		if err := Restore(tree, originals); err != nil {
			panic(fmt.Sprintf("mutate: restore %s after %s: %v", tree, m.Name, err))
		}
	}()
	if m.Queries() {
		generated, err := snapshot(tree, generatedDir)
		if err != nil {
			return &result{verdict: errored, note: err.Error()}
		}
		for file, b := range generated {
			originals[file] = b
		}
		if out, err := command(context.Background(), tree, filepath.Join(bins, "sqlc"), "generate"); err != nil {
			log(out)
			return &result{verdict: errored, note: "the mutant does not generate: " + firstLines(out, 2), elapsed: time.Since(start)}
		}
	}
	bin := filepath.Join(bins, m.Name+".test")
	defer func() { _ = os.Remove(bin) }()
	out, err := command(context.Background(), tree, "go", "test", "-c", "-o", bin, m.Package)
	if err != nil {
		log(out)
		return &result{verdict: errored, note: "the mutant does not compile: " + firstLines(out, 2), elapsed: time.Since(start)}
	}
	out, err = runTests(tree, bin, m.Package, m.Run, o.timeout, true)
	log(out)
	r := &result{elapsed: time.Since(start)}
	switch {
	case err == nil:
		r.verdict, r.note = survived, fmt.Sprintf("%s -run %q passed", m.Package, m.Run)
	case setupFailure.Match(out):
		// The test database could not be made (a template dropped under us, say): the test
		// failed, but not because it noticed the mutation.
		r.verdict, r.note = errored, "the test could not set up its database: "+strings.TrimSpace(string(setupFailure.Find(out)))
	case bytes.Contains(out, []byte("panic: test timed out")):
		r.verdict, r.note = killed, "timed out"
	default:
		r.verdict, r.note = killed, "by "+failures(out)
	}
	return r
}

// runTests runs a test binary of pkg as go test would: in the package's directory.
func runTests(tree, bin, pkg, run string, timeout time.Duration, verbose bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	args := []string{"-test.run", run, "-test.count", "1", "-test.timeout", timeout.String()}
	if verbose {
		args = append(args, "-test.v")
	}
	return command(ctx, filepath.Join(tree, filepath.FromSlash(pkg)), bin, args...)
}

func command(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CI=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// setupFailure matches internal/dbtest's own failures: no database, so no verdict.
var setupFailure = regexp.MustCompile(`dbtest: (build the migrated template|create database|open pool)[^\n]*`)

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failures names the deepest failing tests of a test run's output.
func failures(out []byte) string {
	var names []string
	seen := map[string]bool{}
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		name := string(m[1])
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	// Keep only the leaves: a parent fails because a subtest did.
	var leaves []string
	for _, n := range names {
		leaf := true
		for _, other := range names {
			if strings.HasPrefix(other, n+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			leaves = append(leaves, n)
		}
	}
	sort.Strings(leaves)
	switch {
	case len(leaves) == 0:
		return strings.TrimSpace(firstLines(out, 2))
	case len(leaves) > 3:
		return strings.Join(leaves[:3], ", ") + fmt.Sprintf(" and %d more", len(leaves)-3)
	}
	return strings.Join(leaves, ", ")
}

func firstMatch(out []byte, prefix string) string {
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, prefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func firstLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// copyTree copies the working tree at src to dst, leaving out version control, build output
// and test binaries.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", ".cache":
				return filepath.SkipDir
			}
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasSuffix(rel, ".test") || rel == "coverage.out" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case !info.Mode().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed while we walked: someone is editing
				return nil
			}
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}
