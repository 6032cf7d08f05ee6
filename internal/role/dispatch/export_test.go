package dispatch

// SetCrash makes the dispatcher call f at each crash point (tests only).
func SetCrash(f func(step string)) { crash = f }

// WithHook returns cfg with f called at each crash point of the dispatcher it configures.
func WithHook(cfg Config, f func(step string)) Config {
	cfg.hook = f
	return cfg
}
