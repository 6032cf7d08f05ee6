package streams

// AtLeast exposes the version comparison to the tests.
var AtLeast = atLeast
