package bluesky

import (
	"encoding/binary"
	"regexp"

	"github.com/atmost/atmost/pkg/identity"
)

// base32Sortable is the TID alphabet: its order is the order of the values, so TIDs sort as
// the integers they encode.
const base32Sortable = "234567abcdefghijklmnopqrstuvwxyz"

// tidRE is the TID syntax (atproto.com/specs/tid): 13 characters, the first of which carries
// the integer's top bits.
var tidRE = regexp.MustCompile(`^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$`)

// ValidTID reports whether s has the TID syntax.
func ValidTID(s string) bool { return tidRE.MatchString(s) }

// RecordKey is the record key every record created for the delivery key k gets: a TID made
// of k's first 63 bits (the delivery key is a SHA-256, so its bits are uniform). A TID is a
// 64-bit integer whose top bit is 0, written in 13 base32-sortable characters; the one made
// here always starts with one of 2-7, a or b.
//
// The same key always gives the same record key, so a second createRecord for the same
// intent names a record that already exists, and the PDS never holds two records for one
// intent in a collection. Two different delivery keys of one account and one collection get
// the same record key with probability about n²/2⁶⁴ over n intents (one in 18 million for a
// million intents); then the second intent's create meets the first's record, which is an
// unknown outcome that its lookup and read-back leave to a human, never a second record.
//
// The TID's timestamp bits are not a time here: the record key says nothing about when the
// record was made (createdAt does).
func RecordKey(k identity.DeliveryKey) string {
	v := binary.BigEndian.Uint64(k.Bytes()[:8]) >> 1
	var b [13]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = base32Sortable[v&31]
		v >>= 5
	}
	return string(b[:])
}
