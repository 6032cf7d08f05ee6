package sweep

// Dropped is how many alerts s dropped because the webhook's queue was full.
func Dropped(s *Sweeper) int64 { return s.alerts.dropped.Load() }
