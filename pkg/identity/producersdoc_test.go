package identity

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// between returns the text of doc between <!-- name:start --> and <!-- name:end -->.
func between(t *testing.T, doc, name string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "<!-- "+name+":start -->\n")
	require.True(t, ok, "docs/producers.md has no %s block", name)
	block, _, ok := strings.Cut(rest, "<!-- "+name+":end -->")
	require.True(t, ok, "docs/producers.md: the %s block does not end", name)
	return block
}

func readProducersDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(producersDoc)
	require.NoError(t, err)
	return string(b)
}

// The worked example of docs/producers.md is recomputed line by line: the envelope's canonical
// request, each field of the hash in the documented layout (computed here on its own, not by the
// package), their SHA-256 and the key the package derives; and the shell check hashes the same
// fields to the same sum.
func TestTheProducersDocsWorkedExampleHolds(t *testing.T) {
	doc := readProducersDoc(t)
	lines := map[string]string{}
	for _, line := range strings.Split(between(t, doc, "delivery-key-example"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "```") {
			lines[k] = strings.TrimSpace(v)
		}
	}
	e, err := ParseEnvelope([]byte(lines["envelope"]))
	require.NoError(t, err)
	require.Equal(t, lines["canonical request"], string(e.Request))

	field := func(b string) string {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		return hex.EncodeToString(n[:]) + hex.EncodeToString([]byte(b))
	}
	want := []struct{ name, value string }{
		{"domain", "atmost/delivery-key/v1"}, {"account", e.Account}, {"action", e.Action},
		{"target", e.Target}, {"request", string(e.Request)}, {"occurrence", e.Occurrence},
	}
	var all []string
	for _, f := range want {
		require.Equal(t, field(f.value), lines["field "+f.name], "field %s", f.name)
		all = append(all, lines["field "+f.name])
	}
	b, err := hex.DecodeString(strings.Join(all, ""))
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, "dk1:"+hex.EncodeToString(sum[:]), lines["delivery key"])
	require.Equal(t, lines["delivery key"], e.DeliveryKey().String())

	_, shell, ok := strings.Cut(doc, "printf '%s' ")
	require.True(t, ok, "the shell check")
	shell, _, _ = strings.Cut(shell, "```")
	cmd, out, ok := strings.Cut(shell, "# ")
	require.True(t, ok)
	require.Equal(t, all, regexp.MustCompile(`[0-9a-f]{16,}`).FindAllString(cmd, -1), "the shell check hashes the fields")
	require.True(t, strings.HasPrefix(out, hex.EncodeToString(sum[:])+" "), "the shell check prints the key's hex")

	// The quick start publishes the example's envelope with its key as message id.
	quick := regexp.MustCompile(`nats req atmost\.intent\.(\S+) \\\n  '([^']+)' \\\n  -H 'Nats-Msg-Id:(dk1:[0-9a-f]{64})'`).FindStringSubmatch(doc)
	require.NotNil(t, quick, "the quick start's nats req")
	qe, err := ParseEnvelope([]byte(quick[2]))
	require.NoError(t, err)
	require.Equal(t, AccountToken(qe.Account), quick[1])
	require.Equal(t, qe.DeliveryKey().String(), quick[3])
	require.Equal(t, e.DeliveryKey(), qe.DeliveryKey(), "the respelt example is the same intent")
}

// The account tokens docs/producers.md shows are AccountToken's.
func TestTheProducersDocsAccountTokensHold(t *testing.T) {
	rows := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `atmost\\.intent\\.([^`]+)` \\|$").FindAllStringSubmatch(between(t, readProducersDoc(t), "account-tokens"), -1)
	require.GreaterOrEqual(t, len(rows), 3)
	for _, r := range rows {
		require.Equal(t, r[2], AccountToken(r[1]), r[1])
	}
}

// The reject reasons docs/producers.md explains are AllReasons, in order: a reason added to the
// code is explained to producers.
func TestTheProducersDocsListEveryRejectReason(t *testing.T) {
	var documented []Reason
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(between(t, readProducersDoc(t), "reject-reasons"), -1) {
		documented = append(documented, Reason(m[1]))
	}
	require.Equal(t, AllReasons(), documented)
}
