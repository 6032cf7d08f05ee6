package events

import (
	"encoding/hex"
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
	b := make([]byte, 0, len(idPrefix)+64+1+20)
	b = append(b, idPrefix...)
	b = hex.AppendEncode(b, key.Bytes())
	b = append(b, ':')
	return ID(strconv.AppendInt(b, seq, 10))
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
