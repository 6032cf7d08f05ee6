// Package docs holds the tests that keep atmost's documentation true to the repository: every
// reference to a heading of docs/ names one that exists, every relative Markdown link names a
// file that exists, docs/configuration.md lists exactly the flags and variables each binary's
// --help prints, and the README stays a page a newcomer reads to the end. A document that
// drifts from the code misleads exactly the reader it was written for, so the drift fails
// make test instead of waiting for that reader.
package docs
