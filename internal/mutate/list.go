package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Mutation weakens one guard: every edit is applied, the named tests are run, and they must
// fail.
type Mutation struct {
	Name string
	Desc string
	// Package is the package the tests live in, as go test takes it ("./pkg/ledger").
	Package string
	// Run is the -run regular expression naming the tests that must go red.
	Run   string
	Edits []Edit
	// Line is where the mutation starts in the list file, for messages.
	Line int
}

// Edit replaces Find, which must occur exactly once in File, with Replace.
type Edit struct {
	File    string
	Find    string
	Replace string
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Queries reports whether m edits a query of the ledger, so the code generated from the
// queries must be generated again.
func (m Mutation) Queries() bool {
	for _, e := range m.Edits {
		if strings.HasPrefix(filepath.ToSlash(e.File), "pkg/ledger/queries/") {
			return true
		}
	}
	return false
}

// Schema reports whether m edits a migration.
func (m Mutation) Schema() bool {
	for _, e := range m.Edits {
		if strings.HasPrefix(filepath.ToSlash(e.File), "migrations/") {
			return true
		}
	}
	return false
}

// ParseList reads a mutation list: blocks of "key: value" lines separated by blank lines, '#'
// comment lines ignored. Keys: name, desc, test ("<package> <regex>"), file (applies to the
// find/replace pairs after it), find, replace. A value in double quotes is a Go string literal
// (so it can hold \n and leading spaces); any other value is the rest of the line, trimmed.
func ParseList(r io.Reader, source string) ([]Mutation, error) {
	var (
		out     []Mutation
		cur     *Mutation
		file    string
		pending *Edit // a find still waiting for its replace
		lineNo  int
	)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", source, lineNo, fmt.Sprintf(format, args...))
	}
	finish := func() error {
		if cur == nil {
			return nil
		}
		m := cur
		cur, file = nil, ""
		switch {
		case pending != nil:
			return fmt.Errorf("%s:%d: mutation %s: find without replace", source, m.Line, m.Name)
		case m.Name == "":
			return fmt.Errorf("%s:%d: mutation without a name", source, m.Line)
		case m.Desc == "":
			return fmt.Errorf("%s:%d: mutation %s: no desc", source, m.Line, m.Name)
		case m.Package == "" || m.Run == "":
			return fmt.Errorf("%s:%d: mutation %s: no test", source, m.Line, m.Name)
		case len(m.Edits) == 0:
			return fmt.Errorf("%s:%d: mutation %s: no find/replace", source, m.Line, m.Name)
		}
		out = append(out, *m)
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if trimmed == "" {
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		}
		key, raw, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fail("want key: value, got %q", line)
		}
		key = strings.TrimSpace(key)
		value, err := parseValue(raw)
		if err != nil {
			return nil, fail("%s: %v", key, err)
		}
		if cur == nil {
			cur = &Mutation{Line: lineNo}
		}
		switch key {
		case "name":
			if !namePattern.MatchString(value) {
				return nil, fail("name %q: use lower case, digits and dashes", value)
			}
			cur.Name = value
		case "desc":
			cur.Desc = value
		case "test":
			pkg, run, ok := strings.Cut(value, " ")
			run = strings.TrimSpace(run)
			if !ok || run == "" || !strings.HasPrefix(pkg, "./") {
				return nil, fail("test: want \"./<package> <regex>\", got %q", value)
			}
			cur.Package, cur.Run = pkg, run
		case "file":
			if filepath.IsAbs(value) || strings.HasPrefix(filepath.Clean(value), "..") {
				return nil, fail("file %q must be relative to the repository root", value)
			}
			file = filepath.Clean(value)
		case "find":
			if pending != nil {
				return nil, fail("find after find: a replace is missing")
			}
			if file == "" {
				return nil, fail("find before any file")
			}
			if value == "" {
				return nil, fail("empty find")
			}
			pending = &Edit{File: file, Find: value}
		case "replace":
			if pending == nil {
				return nil, fail("replace without find")
			}
			if value == pending.Find {
				return nil, fail("replace equals find: not a mutation")
			}
			pending.Replace = value
			cur.Edits = append(cur.Edits, *pending)
			pending = nil
		default:
			return nil, fail("unknown key %q", key)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, m := range out {
		if seen[m.Name] {
			return nil, fmt.Errorf("%s:%d: mutation name %s used twice", source, m.Line, m.Name)
		}
		seen[m.Name] = true
	}
	return out, nil
}

func parseValue(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if strings.HasPrefix(v, `"`) {
		return strconv.Unquote(v)
	}
	return v, nil
}

// ReadList parses the list file at path.
func ReadList(path string) ([]Mutation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return ParseList(f, path)
}

// Check reports, for each mutation, why it cannot be applied to the tree at root: a file that
// is missing, or a find that does not occur exactly once (a stale list). Edits of one mutation
// are applied in order, each checked against the text the earlier ones left.
func Check(root string, m Mutation) error {
	_, err := Apply(root, m, false)
	return err
}

// Apply applies m's edits to the files under root and returns their original contents, keyed
// by the path relative to root. With write false it only checks.
func Apply(root string, m Mutation, write bool) (map[string][]byte, error) {
	originals := map[string][]byte{}
	current := map[string]string{}
	var order []string
	for _, e := range m.Edits {
		text, ok := current[e.File]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, e.File))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", e.File, err)
			}
			originals[e.File] = b
			text = string(b)
			order = append(order, e.File)
		}
		if n := strings.Count(text, e.Find); n != 1 {
			return nil, fmt.Errorf("%s: the snippet %q occurs %d times, want exactly 1 (stale mutation list?)", e.File, abbreviate(e.Find), n)
		}
		current[e.File] = strings.Replace(text, e.Find, e.Replace, 1)
	}
	if write {
		for _, file := range order {
			path := filepath.Join(root, file)
			info, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(current[file]), info.Mode().Perm()); err != nil {
				return nil, err
			}
		}
	}
	return originals, nil
}

// Restore writes back what Apply returned and checks that it took.
func Restore(root string, originals map[string][]byte) error {
	for file, b := range originals {
		path := filepath.Join(root, file)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, b, info.Mode().Perm()); err != nil {
			return err
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if string(got) != string(b) {
			return fmt.Errorf("%s: restore did not take", file)
		}
	}
	return nil
}

func abbreviate(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
