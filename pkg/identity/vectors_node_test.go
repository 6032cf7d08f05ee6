package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// nodeCheck is the JavaScript implementation's check against the shared vectors. It proves
// that the rule docs/producers.md states is implementable outside Go, from the page alone, and
// it is the derivation a TypeScript client reuses.
const nodeCheck = "../../clients/typescript/identity/check-vectors.mjs"

func TestTheVectorsHoldInJavaScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is not installed, and CI must run the JavaScript check of the identity vectors: %v", err)
		}
		t.Skipf("needs Node.js (node on PATH) to run the JavaScript key rule against the identity vectors: %v", err)
	}
	out, err := exec.Command(node, nodeCheck, vectorsPath).CombinedOutput()
	if err != nil {
		t.Fatalf("the JavaScript key rule disagrees with the vectors (%v):\n%s", err, out)
	}
	t.Logf("%s", out)
	// Every vector is checked, none skipped: a kind JavaScript leaves out is a rule it does not hold.
	raw, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	var vectors []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &vectors))
	require.Contains(t, string(out), fmt.Sprintf("checked %d of %d vectors ", len(vectors), len(vectors)))
}

// The source id rule in JavaScript agrees with CanonicalSourceID beyond the vectors: on 20,000
// ids assembled at random from the pieces where url.Parse and netip decide (schemes, userinfo,
// IPv6 literals and zones, ports, %-escapes, control and space characters, fragments).
func TestTheSourceIDRuleAgreesInJavaScriptOnRandomIDs(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node is not installed, and CI must run the JavaScript source id rule: %v", err)
		}
		t.Skipf("needs Node.js (node on PATH): %v", err)
	}
	starts := []string{"http://", "HTTPS://", "https://", "HtTp://", "http:", "ftp://", "//", "", " \u3000"}
	users := []string{"", "u@", "U:p%20w@", "a@b@", "@", "us\u00e9r@", "u%zz@", "u[@", "u%41@"}
	hosts := []string{"Example.ORG", "[::1]", "[FE80::1%25EN0]", "[1.2.3.4]", "[::FFFF:1.2.3.4]", "[::1", "::1]", "[gg::1]",
		"[fe80::1%25]", "[fe80::1%en0]", "\u00c9X.org", "a%C3%A9", "a%41", "", "a b", "a\x01", "x[::1]", "[::1]]", "[1::2::3]",
		"[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7:8:9]", "[::1.2.3.4]", "[1:2:3:4:5:6:1.2.3.4]", "[1:2:3:4:5:6:7:1.2.3.4]",
		"[fe80::1%25a%20b]", "[fe80::1%25%C3%A9]", "[fe80::1%25%3A]", "[::01.2.3.4]", "[::1.2.3]", "[12345::]", "[%25x]",
		"a:b", "a]b", "Exa\u00a0Mple", "a\\b", "a<b>\"c", "Cafe\u0301"}
	ports := []string{"", ":", ":80", ":443", ":8080", ":080", ":8a", "::80", ":65536", ":%38%30"}
	tails := []string{"", "/", "/A", "?q", "?", "#f", "/a?b#c", "/%zz", "?%zz", "#%zz", "#\x01", "/a b", "??", "/a\tb", "/x#y#z", "/100%", "?\x7f"}
	r := rand.New(rand.NewPCG(7, 11))
	pick := func(s []string) string { // the first piece, a plain one, a third of the time
		if r.IntN(3) == 0 {
			return s[0]
		}
		return s[r.IntN(len(s))]
	}
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = pick(starts) + pick(users) + pick(hosts) + pick(ports) + pick(tails)
	}
	in, err := json.Marshal(ids)
	require.NoError(t, err)
	script := `import { readFileSync } from 'node:fs';
const id = await import(process.argv[1]);
const out = JSON.parse(readFileSync(0, 'utf8')).map((s) => { try { return id.canonicalSourceID(s); } catch (e) { return 'error: ' + e.code; } });
process.stdout.write(JSON.stringify(out));`
	module, err := filepath.Abs("../../clients/typescript/identity/identity.mjs")
	require.NoError(t, err)
	cmd := exec.Command(node, "--input-type=module", "-e", script, module)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err)
	var got []string
	require.NoError(t, json.Unmarshal(out, &got))
	require.Len(t, got, len(ids))
	rewritten := 0
	for i, s := range ids {
		want, err := CanonicalSourceID(s)
		if errors.Is(err, ErrEmptySourceID) {
			want = "error: empty_source_id"
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, want, got[i], "source id %q", s)
		if trimmed := strings.TrimFunc(norm.NFC.String(s), unicode.IsSpace); want != trimmed && err == nil {
			rewritten++
		}
	}
	t.Logf("%d ids, %d canonicalized as http(s) URLs, the others kept as trimmed NFC: JavaScript agrees on each", len(ids), rewritten)
	require.Greater(t, rewritten, len(ids)/10, "too few ids reach the URL rewriting to test it")
}
