// Package api holds the test that keeps the tables of atmost's importable packages (pkg/) out of
// their importers' reach: a table (a slice, a map or an array) is handed out by a function that
// returns a copy (atmosttype.Reasons, platform.DefaultAuthStatuses), never as an exported
// variable any importer could change for every other caller in its process.
package api
