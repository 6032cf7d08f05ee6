package adapters

import (
	"context"
	"errors"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
)

// Why a read-back did not confirm an object.
const (
	ReadBackMismatch    = "mismatch"    // the object's text differs from the request's
	ReadBackUnsupported = "unsupported" // the platform offers no read-back
	ReadBackMissing     = "missing"     // not found within the budget
	ReadBackUnavailable = "unavailable" // the read failed within the budget
)

// ReadBack fetches the object objectID and compares its text with r's, within ctx. Reads are
// safe to repeat, so a read that could not tell (not found yet on a platform slow to show a
// new object, or failed) is tried again until ctx ends. It returns whether the text was
// confirmed, and otherwise why not (one of the ReadBack constants) with a detail for humans.
func ReadBack(ctx context.Context, ad platform.Adapter, r platform.Request, objectID string) (confirmed bool, why, detail string) {
	obj, err := ad.ReadBack(ctx, r, objectID)
	return readBackFrom(ctx, ad, r, objectID, obj, err)
}

// ReadBackAfter is ReadBack for an object whose first read was already made (one item of a
// platform.ManyReader's grouped read), with that read's answer: when it could not tell, the
// object is read again, alone, after a pause, until ctx ends.
func ReadBackAfter(ctx context.Context, ad platform.Adapter, r platform.Request, objectID string, first platform.ReadResult) (confirmed bool, why, detail string) {
	return readBackFrom(ctx, ad, r, objectID, first.Object, first.Err)
}

// Judge is what one read's answer says: final is false when it could not tell (not found, or
// the read failed) and reading again may.
func Judge(r platform.Request, obj platform.Object, err error) (confirmed bool, why, detail string, final bool) {
	switch {
	case err == nil && identity.SameText(obj.Text, r.Text):
		return true, "", "confirmed", true
	case err == nil:
		return false, ReadBackMismatch, "text differs", true
	case errors.Is(err, platform.ErrNoReadBack):
		return false, ReadBackUnsupported, "the platform offers no read-back", true
	}
	return false, "", "", false
}

func readBackFrom(ctx context.Context, ad platform.Adapter, r platform.Request, objectID string, obj platform.Object, err error) (confirmed bool, why, detail string) {
	pause := 50 * time.Millisecond
	for {
		if confirmed, why, detail, final := Judge(r, obj, err); final {
			return confirmed, why, detail
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(err, platform.ErrNotFound) {
				return false, ReadBackMissing, "object not found"
			}
			return false, ReadBackUnavailable, "read-back unavailable: " + err.Error()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
		obj, err = ad.ReadBack(ctx, r, objectID)
	}
}
