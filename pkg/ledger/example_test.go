package ledger_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The state machine is data: what each operation may lead to from each phase. What is absent
// is the point: nothing takes an unknown outcome back to pending, and nothing leaves published.
func ExampleAllowed() {
	to, ok := ledger.Allowed(ledger.PhaseIndeterminate, ledger.OpReconcile)
	fmt.Println(to, ok)
	_, ok = ledger.Allowed(ledger.PhaseIndeterminate, ledger.OpRetry)
	fmt.Println(ok)
	_, ok = ledger.Allowed(ledger.PhasePublished, ledger.OpPark)
	fmt.Println(ok)
	// Output:
	// [published failed parked] true
	// false
	// false
}

// Every reason leads to one state, and says whether what it ended may be tried again: a
// connection that failed before any byte may be retried; a send whose outcome is unknown
// never is.
func ExampleReason_Rule() {
	for _, r := range []ledger.Reason{ledger.ReasonConnectionFailed, ledger.ReasonSendUnknown, ledger.ReasonReconcileNotFound} {
		rule, _ := r.Rule()
		fmt.Printf("%s: %s (retry: %s)\n", r, rule.State, rule.Retry)
	}
	// Output:
	// connection_failed: failed (retry: by policy)
	// send_unknown: indeterminate (retry: never)
	// reconcile_not_found: parked (retry: human)
}

// One intent from submission to a confirmed send, as ingest and the dispatcher drive it. It
// needs a migrated ledger (atmost migrate) with the account configured, so it is compiled but
// not run; the tests run the same calls on a real database.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("ATMOST_DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	l, err := ledger.New(pool, ledger.Config{Actor: "example"})
	if err != nil {
		panic(err)
	}

	e, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"news-bot","action":"post","request":{"text":"Hello, world"}}`))
	if err != nil {
		panic(err)
	}
	// Submitting the same intent again creates nothing: the delivery key is the identity.
	if _, err := l.Submit(ctx, []identity.Envelope{e}); err != nil {
		panic(err)
	}

	var requestHash [32]byte // the platform.Prepared's Hash of the rendered request
	claim, err := l.Begin(ctx, e.DeliveryKey(), requestHash, 30*time.Second)
	if err != nil {
		panic(err)
	}
	auth, err := l.Authorize(ctx, claim, 10*time.Second, "")
	if err != nil {
		panic(err)
	}
	if !auth.Authorized() {
		fmt.Println("refused:", auth.State, auth.Reason)
		return
	}
	// ... send exactly the prepared bytes once, then read the object back ...
	done, err := l.Complete(ctx, claim, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(done.State, done.Reason)
}
