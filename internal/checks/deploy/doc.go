// Package deploy holds no code: its test loads the repository's compose.yaml with compose-go and
// checks the scaled-out topology it describes (a 3-node CockroachDB cluster, a 3-node NATS
// cluster with JetStream, every role with R3 streams, two dispatchers, the platform simulator)
// against the binaries: every environment variable a service sets is one its binary's --help
// names, and the Dockerfile builds every binary a service runs. It is a package of its own so
// that compose-go stays a test dependency and never reaches a binary.
package deploy
