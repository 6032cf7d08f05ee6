package bluesky_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// decodeTID is the inverse of the TID encoding, written independently of the adapter's.
func decodeTID(t *testing.T, s string) uint64 {
	t.Helper()
	const alphabet = "234567abcdefghijklmnopqrstuvwxyz"
	var v uint64
	for _, c := range s {
		i := strings.IndexRune(alphabet, c)
		require.GreaterOrEqual(t, i, 0, "%q is not in the alphabet", c)
		v = v<<5 | uint64(i)
	}
	return v
}

// Many keys all give valid TIDs: 13 characters of the sortable alphabet, the first in
// [234567ab] (the top bit of a TID is 0), encoding exactly the key's first 63 bits.
func TestRecordKeysAreValidTIDsOfTheKeysFirst63Bits(t *testing.T) {
	seen := map[string]identity.DeliveryKey{}
	for i := range 20000 {
		sum := sha256.Sum256([]byte(fmt.Sprint("key ", i)))
		k, err := identity.DeliveryKeyFromBytes(sum[:])
		require.NoError(t, err)
		rkey := bluesky.RecordKey(k)
		require.Len(t, rkey, 13)
		require.True(t, bluesky.ValidTID(rkey), rkey)
		require.Contains(t, "234567ab", rkey[:1], "the top bit of a TID is 0")
		require.Equal(t, binary.BigEndian.Uint64(sum[:8])>>1, decodeTID(t, rkey))
		require.Equal(t, rkey, bluesky.RecordKey(k), "deterministic")
		if other, ok := seen[rkey]; ok {
			t.Fatalf("keys %s and %s share the record key %s", other, k, rkey)
		}
		seen[rkey] = k
	}
}

// The extremes of the 63 bits still encode as TIDs, and TIDs sort as the values they encode.
func TestRecordKeyExtremes(t *testing.T) {
	for _, c := range []struct {
		first8 string
		want   string
	}{
		{"0000000000000000", "2222222222222"},
		{"0000000000000001", "2222222222222"}, // the lowest bit is dropped
		{"0000000000000002", "2222222222223"},
		{"ffffffffffffffff", "bzzzzzzzzzzzz"},
		{"7fffffffffffffff", "5zzzzzzzzzzzz"},
		{"8000000000000000", "6222222222222"},
	} {
		k := key(t, c.first8+strings.Repeat("5", 48))
		got := bluesky.RecordKey(k)
		require.Equal(t, c.want, got, c.first8)
		require.True(t, bluesky.ValidTID(got))
	}
	require.Less(t, bluesky.RecordKey(key(t, "7fffffffffffffff"+strings.Repeat("0", 48))),
		bluesky.RecordKey(key(t, "8000000000000000"+strings.Repeat("0", 48))))
}

func TestValidTID(t *testing.T) {
	for _, s := range []string{"3jzfcijpj2z2a", "7777777777777", "3zzzzzzzzzzzz", "2222222222222", "jzzzzzzzzzzzz"} {
		require.True(t, bluesky.ValidTID(s), s)
	}
	for _, s := range []string{"", "3jzfcijpj2z2", "3jzfcijpj2z2aa", "kjzfcijpj2z2a", "3jzfcijpj2z2A", "3jzfcijpj2z21", "3jzfcijpj2z2-", "zzzzzzzzzzzzz"} {
		require.False(t, bluesky.ValidTID(s), s)
	}
}
