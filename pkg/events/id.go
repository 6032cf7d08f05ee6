package events

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/atmost/atmost/pkg/identity"
)

// ID identifies one transition of one intent: "ev1:<64 hex of the delivery key>:<seq>". It is
// stable: the same transition always has the same id, whoever publishes it and how often.
type ID string

const idPrefix = "ev1:"

// ErrMalformedID reports an event id that is not of the form NewID makes.
var ErrMalformedID = errors.New("events: malformed event id")

// NewID returns the id of transition seq (1 = creation) of the intent with key.
func NewID(key identity.DeliveryKey, seq int64) ID {
	return ID(appendID(make([]byte, 0, idLen), key, seq))
}

// idLen is the longest id: the prefix, 64 hex digits, a colon and a sequence of 19 digits.
const idLen = len(idPrefix) + 64 + 1 + 19

// appendID appends the id of transition seq of the intent with key to b.
func appendID(b []byte, key identity.DeliveryKey, seq int64) []byte {
	b = key.AppendHex(append(b, idPrefix...))
	return strconv.AppendInt(append(b, ':'), seq, 10)
}

// derives reports whether id is the one of transition seq of the intent with key, without an
// id of its own to compare: every event is checked so before it is encoded.
func (id ID) derives(key identity.DeliveryKey, seq int64) bool {
	var buf [idLen]byte
	return string(appendID(buf[:0], key, seq)) == string(id)
}

// ParseID splits an event id into its delivery key and sequence number.
func ParseID(s string) (identity.DeliveryKey, int64, error) {
	rest, ok := strings.CutPrefix(s, idPrefix)
	if !ok {
		return identity.DeliveryKey{}, 0, fmt.Errorf("%w: %q lacks the %q prefix", ErrMalformedID, s, idPrefix)
	}
	hexKey, seqText, ok := strings.Cut(rest, ":")
	if !ok {
		return identity.DeliveryKey{}, 0, fmt.Errorf("%w: %q has no sequence", ErrMalformedID, s)
	}
	key, err := identity.ParseDeliveryKey("dk1:" + hexKey)
	if err != nil {
		return identity.DeliveryKey{}, 0, fmt.Errorf("%w: %v", ErrMalformedID, err)
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != seqText {
		return identity.DeliveryKey{}, 0, fmt.Errorf("%w: sequence %q is not a positive decimal", ErrMalformedID, seqText)
	}
	return key, seq, nil
}
