package adapters

import (
	"bytes"
	"sync"

	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// Cache keeps one open adapter per account, reopened when the account's platform, settings or
// credential change. It is safe for concurrent use.
type Cache struct {
	registry platform.Registry
	mu       sync.Mutex
	opened   map[string]openAdapter
}

type openAdapter struct {
	account ledger.Account
	adapter platform.Adapter
}

// NewCache returns a cache opening adapters from r.
func NewCache(r platform.Registry) *Cache {
	return &Cache{registry: r, opened: map[string]openAdapter{}}
}

// Open returns the account's adapter, opening it on first use and again after its
// configuration changed.
func (a *Cache) Open(acct ledger.Account) (platform.Adapter, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.opened[acct.ID]; ok && sameConfig(o.account, acct) {
		return o.adapter, nil
	}
	ad, err := a.registry.Open(platform.Account{ID: acct.ID, Platform: acct.Platform, Settings: acct.Settings,
		CredentialRef: acct.CredentialRef, CredentialVersion: acct.CredentialVersion})
	if err != nil {
		return nil, err
	}
	a.opened[acct.ID] = openAdapter{account: acct, adapter: ad}
	return ad, nil
}

func sameConfig(a, b ledger.Account) bool {
	return a.Platform == b.Platform && bytes.Equal(a.Settings, b.Settings) && a.CredentialRef == b.CredentialRef &&
		a.CredentialVersion == b.CredentialVersion
}
