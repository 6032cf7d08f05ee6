package reconcile

// SetCrash sets the process-wide crash point (the subprocess tests SIGKILL themselves there).
func SetCrash(f func(step string)) { crash = f }

// WithHook returns cfg with a hook called at each crash point of this reconciler.
func WithHook(cfg Config, f func(step string)) Config {
	cfg.hook = f
	return cfg
}
