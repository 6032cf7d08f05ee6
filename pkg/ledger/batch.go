package ledger

import (
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
)

// keyIndex maps the delivery keys of a batch to their position in it.
type keyIndex map[identity.DeliveryKey]int

// indexKeys indexes n keys, refusing an empty batch and a key that appears twice: one
// statement changes each row at most once.
func indexKeys(n int, key func(i int) identity.DeliveryKey) (keyIndex, error) {
	if n == 0 {
		return nil, errors.New("empty batch")
	}
	index := make(keyIndex, n)
	for i := 0; i < n; i++ {
		k := key(i)
		if _, dup := index[k]; dup {
			return nil, fmt.Errorf("%s appears twice in one batch", k)
		}
		index[k] = i
	}
	return index, nil
}

// of returns the position of the key whose bytes are b.
func (x keyIndex) of(b []byte) (int, error) {
	k, err := identity.DeliveryKeyFromBytes(b)
	if err != nil {
		return 0, err
	}
	i, ok := x[k]
	if !ok {
		return 0, fmt.Errorf("answer for %s, which was not asked", k)
	}
	return i, nil
}
