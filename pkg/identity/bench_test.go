package identity_test

import (
	"testing"

	"github.com/atmost/atmost/pkg/identity"
)

// BenchmarkParseEnvelope is ingest's reading of one intent: the strict parse, the canonical
// request and the derived delivery key.
//
//	go test -run '^$' -bench ParseEnvelope ./pkg/identity/
func BenchmarkParseEnvelope(b *testing.B) {
	raw := []byte(`{"v":1,"account":"acct-1","action":"post","target":"feed/7","request":{"text":"hello there, a post of some length","langs":["en"],"reply":{"root":"at://x/y","parent":"at://x/z"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		env, err := identity.ParseEnvelope(raw)
		if err != nil {
			b.Fatal(err)
		}
		_ = env.DeliveryKey()
	}
}
