// Package deploy holds no code: its test loads the repository's compose.yaml with compose-go,
// once per profile, and checks the two sizes it describes (single: one PostgreSQL, one NATS
// server with JetStream, one of each role with R1 streams; cluster: a 3-node CockroachDB
// cluster, a 3-node NATS cluster with JetStream, every role with R3 streams, two dispatchers;
// both with the platform simulator and a Prometheus whose mounted config, under
// deploy/prometheus, scrapes every role of its size and nothing else) against the binaries:
// every environment variable a service sets is one its binary's --help names, and the
// Dockerfile builds every binary a service runs. It is a package of its own so that compose-go
// stays a test dependency and never reaches a binary.
package deploy
