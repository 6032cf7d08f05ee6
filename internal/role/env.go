package role

import (
	"regexp"
	"strconv"
	"time"
)

// Env reads settings from the environment; a variable set to "" counts as unset.
type Env func(name string) (string, bool)

// String returns the variable's value or def.
func (e Env) String(name, def string) string {
	if v, ok := e(name); ok && v != "" {
		return v
	}
	return def
}

// Int returns the variable as an integer, or def when it is unset or not one (the flag's
// validation then reports the default it used).
func (e Env) Int(name string, def int) int {
	if n, err := strconv.Atoi(e.String(name, "")); err == nil {
		return n
	}
	return def
}

// Bool returns the variable as a boolean ("true", "false", "1", "0"), or def.
func (e Env) Bool(name string, def bool) bool {
	if b, err := strconv.ParseBool(e.String(name, "")); err == nil {
		return b
	}
	return def
}

// Duration returns the variable as a duration ("30s"), or def.
func (e Env) Duration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(e.String(name, "")); err == nil {
		return d
	}
	return def
}

// envOfFlag finds the environment variable a flag's usage names: "(env ATMOST_...)".
var envOfFlag = regexp.MustCompile(`\(env (ATMOST_[A-Z0-9_]+)\)`)
